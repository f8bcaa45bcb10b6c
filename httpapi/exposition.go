package httpapi

import (
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// exposition serves what g gathers as promhttp.HandlerFor(g,
// promhttp.HandlerOpts{}) does: the format negotiated from Accept among
// expfmt's default formats (text, protobuf delimited and text), gzip when
// Accept-Encoding prefers it, the name[] filter, a 500 naming the error
// when gathering fails, and encoding stopped at the first error.
//
// It is not promhttp because importing promhttp links, by its package
// init, a table of 32 response-writer wrapper types for its instrumenting
// middleware (we use none of it): about 330 KB of the daemon's binary
// (bench/README.md). TestExpositionAsPromhttp checks the two answer alike.
func exposition(g prometheus.Gatherer) http.Handler {
	accepted := expfmt.DefaultAcceptedFormats()
	// Compressors kept between scrapes: one's state is hundreds of KiB.
	zws := sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mfs, err := g.Gather()
		if err != nil {
			http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
			return
		}
		format := expfmt.NegotiateAccept(r.Header, accepted...)
		h := w.Header()
		h.Add("Vary", "Accept")
		h.Add("Vary", "Accept-Encoding")
		h.Set("Content-Type", string(format))
		out := io.Writer(w)
		if acceptsGzip(r.Header.Values("Accept-Encoding")) {
			h.Set("Content-Encoding", "gzip")
			zw := zws.Get().(*gzip.Writer)
			zw.Reset(w)
			defer func() {
				_ = zw.Close()
				zws.Put(zw)
			}()
			out = zw
		}
		var only map[string]bool
		if r.URL != nil {
			if names := r.URL.Query()["name[]"]; len(names) > 0 {
				only = make(map[string]bool, len(names))
				for _, n := range names {
					only[n] = true
				}
			}
		}
		enc := expfmt.NewEncoder(out, format)
		for _, mf := range mfs {
			if only != nil && !only[mf.GetName()] {
				continue
			}
			if enc.Encode(mf) != nil {
				return // the answer has begun: all that is left is to stop
			}
		}
		if c, ok := enc.(expfmt.Closer); ok {
			_ = c.Close()
		}
	})
}

// acceptsGzip is promhttp's choice between its offers identity and gzip
// (in that order): the offer an Accept-Encoding entry names, or "*" covers,
// with the highest q, the earlier offer on a tie; identity when none does
// or the best q is 0. Where promhttp's parser gives up on the rest of a
// header at an item it cannot read ("br;level=5, gzip"), this one skips
// that item only.
func acceptsGzip(values []string) bool {
	best, bestQ := "identity", -1.0
	for _, offer := range []string{"identity", "gzip"} {
		for _, v := range values {
			for _, item := range strings.Split(v, ",") {
				name, q, ok := acceptItem(item)
				if ok && q > bestQ && (name == "*" || name == offer) {
					best, bestQ = offer, q
				}
			}
		}
	}
	return best == "gzip" && bestQ > 0
}

// acceptItem parses "gzip" or "gzip;q=0.5": the coding and its weight (1
// when none is given); ok is false for an item promhttp skips (empty, a
// parameter other than q, a weight not in [0, 1]).
func acceptItem(item string) (name string, q float64, ok bool) {
	name, params, hasParams := strings.Cut(item, ";")
	name = strings.TrimSpace(name)
	if name == "" {
		return "", 0, false
	}
	if !hasParams {
		return name, 1, true
	}
	w, isQ := strings.CutPrefix(strings.TrimSpace(params), "q=")
	if !isQ {
		return "", 0, false
	}
	q, err := strconv.ParseFloat(strings.TrimSpace(w), 64)
	if err != nil || q < 0 || q > 1 {
		return "", 0, false
	}
	return name, q, true
}
