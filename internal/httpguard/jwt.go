package httpguard

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	_ "crypto/sha512" // and SHA-384, SHA-512
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/axocoatl/axocoatl-go/internal/cfgerr"
	"io"
	"maps"
	"math/big"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of a zero OAuth's bounds.
const (
	DefaultClockSkew = 60 * time.Second
	// DefaultJWKSRefresh is how long a fetched key set is used before it is
	// fetched again (a token naming a kid the set lacks fetches sooner,
	// at most once per DefaultJWKSMinRefresh).
	DefaultJWKSRefresh    = time.Hour
	DefaultJWKSMinRefresh = 10 * time.Second
	DefaultJWKSTimeout    = 10 * time.Second
	// DefaultMaxJWKSBytes bounds a key set (and a discovery document).
	DefaultMaxJWKSBytes = 256 << 10
	// DefaultMaxJWKSKeys bounds the keys of a set that are kept.
	DefaultMaxJWKSKeys = 100
	// MaxJWTBytes bounds a presented JWT: a longer one is refused unread.
	MaxJWTBytes = 16 << 10
	// MaxVerifiedTokens bounds the tokens whose verification is
	// remembered (by SHA-256 digest, until their exp); past it an entry
	// is dropped for each new one.
	MaxVerifiedTokens = 10000
)

// Errors of JWT validation; every one is a 401 invalid_token.
var (
	ErrJWTMalformed = errors.New("malformed JWT")
	ErrJWTAlg       = errors.New("JWT algorithm not accepted")
	ErrJWTKid       = errors.New("JWT key id not in the issuer's key set")
	ErrJWTSignature = errors.New("JWT signature does not verify")
	ErrJWTClaims    = errors.New("JWT claims refused")
	ErrJWKS         = errors.New("issuer key set unavailable")
)

// OAuth configures JWT access tokens from one authorization server.
type OAuth struct {
	Issuer   string // the iss every token must carry, exactly
	Audience string // a value the token's aud must contain
	// JWKSURL is the key set. Zero: jwks_uri of the issuer's metadata
	// (RFC 8414 /.well-known/oauth-authorization-server, then OpenID
	// /.well-known/openid-configuration).
	JWKSURL string
	// ScopeMap maps a token's scope values (the space-separated "scope"
	// claim, or the "scp" array) to guard scopes. Zero: a value that is a
	// scope name (read, execute, approve, admin) maps to itself.
	ScopeMap map[string][]string
	// Agents are the agent globs of every JWT caller. Zero: every agent.
	Agents      []string
	ClockSkew   time.Duration // zero: DefaultClockSkew
	Refresh     time.Duration // zero: DefaultJWKSRefresh
	MinRefresh  time.Duration // zero: DefaultJWKSMinRefresh
	Timeout     time.Duration // one fetch; zero: DefaultJWKSTimeout
	MaxJWKSBody int64         // zero: DefaultMaxJWKSBytes
	Client      *http.Client  // zero: a client with Timeout
}

// Verifier checks JWT access tokens against an OAuth configuration. Keys
// are fetched when first needed, used for Refresh, and fetched again
// sooner when a token names a kid the set lacks (at most once per
// MinRefresh, so unknown kids cannot make it hammer the issuer). Fetches
// run in the request that needs them, one at a time; no goroutine is left
// behind. It is safe for concurrent use.
type Verifier struct {
	cfg OAuth
	now func() time.Time

	fetchMu sync.Mutex // one fetch at a time
	mu      sync.RWMutex
	keys    map[string]crypto.PublicKey
	fetched time.Time // last fetch attempt
	// fetchErr is why the last fetch failed (nil: it worked): while
	// MinRefresh keeps the next one back, a token whose key is not cached
	// is refused for it, the issuer's outage, not for a kid it lacks.
	fetchErr error
	jwksURL  string
	scopes   []string // the scope values the ScopeMap names (for metadata)
	// The issuer's endpoints, from its metadata (Endpoints).
	authURL, tokenURL string
	metaTried         time.Time

	// verified remembers tokens whose signature and claims checked out,
	// by digest, so that a client sending the same access token on every
	// request pays a hash, not a signature check, each time. Emptied when
	// a fetch changes the key set (a key withdrawn takes its tokens along).
	verifiedMu  sync.Mutex
	verified    map[[32]byte]verifiedToken
	maxVerified int // MaxVerifiedTokens; smaller in tests
}

type verifiedToken struct {
	p        *Principal
	exp, nbf time.Time
}

// NewVerifier checks o and returns its Verifier.
func NewVerifier(o OAuth) (*Verifier, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.ClockSkew == 0 {
		o.ClockSkew = DefaultClockSkew
	}
	if o.Refresh == 0 {
		o.Refresh = DefaultJWKSRefresh
	}
	if o.MinRefresh == 0 {
		o.MinRefresh = DefaultJWKSMinRefresh
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultJWKSTimeout
	}
	if o.MaxJWKSBody == 0 {
		o.MaxJWKSBody = DefaultMaxJWKSBytes
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.Timeout}
	}
	v := &Verifier{cfg: o, now: time.Now, jwksURL: o.JWKSURL, maxVerified: MaxVerifiedTokens}
	if len(o.ScopeMap) == 0 {
		v.scopes = []string{ScopeRead, ScopeExecute, ScopeApprove, ScopeAdmin}
	} else {
		for k := range o.ScopeMap {
			v.scopes = append(v.scopes, k)
		}
		slices.Sort(v.scopes)
	}
	return v, nil
}

// Validate checks the issuer and JWKS URL (absolute http(s)), the
// audience (set), the scope map (known scopes) and the agent globs.
func (o OAuth) Validate() error {
	var errs []error
	if u, err := url.Parse(o.Issuer); o.Issuer == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		errs = append(errs, cfgerr.Errorf("issuer", "%q must be the authorization server's absolute http(s) URL", o.Issuer))
	}
	if o.Audience == "" {
		errs = append(errs, cfgerr.Errorf("audience", "must be set (the aud this server's tokens carry, usually its public URL)"))
	}
	if o.JWKSURL != "" {
		if u, err := url.Parse(o.JWKSURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			errs = append(errs, cfgerr.Errorf("jwks_url", "%q must be an absolute http(s) URL", o.JWKSURL))
		}
	}
	for k, ss := range o.ScopeMap {
		for _, s := range ss {
			if !KnownScope(s) {
				errs = append(errs, cfgerr.Errorf("scopes."+k, "%q is not a scope (read, execute, approve, admin)", s))
			}
		}
	}
	for j, g := range o.Agents {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			errs = append(errs, cfgerr.Errorf(fmt.Sprintf("agents[%d]", j), "%q is not a glob (path.Match syntax)", g))
		}
	}
	if o.ClockSkew < 0 || o.Refresh < 0 || o.MinRefresh < 0 || o.Timeout < 0 || o.MaxJWKSBody < 0 {
		errs = append(errs, cfgerr.Errorf("clock_skew", "clock_skew, jwks_refresh, jwks_min_refresh, jwks_timeout and max_jwks_bytes must not be negative"))
	}
	return errors.Join(errs...)
}

// Endpoints are the issuer's authorization and token endpoints, from its
// metadata (RFC 8414 or OpenID discovery), fetched on first need (at most
// once per MinRefresh while it fails, bounded like a key set fetch); ""
// where unknown.
func (v *Verifier) Endpoints(ctx context.Context) (authURL, tokenURL string) {
	v.mu.RLock()
	authURL, tokenURL = v.authURL, v.tokenURL
	tried := v.metaTried
	v.mu.RUnlock()
	if tokenURL != "" || (!tried.IsZero() && v.now().Sub(tried) < v.cfg.MinRefresh) {
		return authURL, tokenURL
	}
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	v.mu.Lock()
	v.metaTried = v.now()
	v.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	_, _ = v.discover(ctx)
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.authURL, v.tokenURL
}

// Issuer is the configured issuer.
func (v *Verifier) Issuer() string { return v.cfg.Issuer }

// ScopesSupported are the token scope values that map to guard scopes.
func (v *Verifier) ScopesSupported() []string { return slices.Clone(v.scopes) }

// LooksLikeJWT reports whether tok has the three dot-separated parts of a
// compact JWS (static tokens are never checked as JWTs).
func LooksLikeJWT(tok string) bool { return strings.Count(tok, ".") == 2 }

type jwtHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

type jwtClaims struct {
	Iss   string          `json:"iss"`
	Sub   string          `json:"sub"`
	Aud   json.RawMessage `json:"aud"`
	Exp   *json.Number    `json:"exp"`
	Nbf   *json.Number    `json:"nbf"`
	Scope string          `json:"scope"`
	Scp   json.RawMessage `json:"scp"`
}

// Verify checks raw (a compact JWS) and returns its principal: the
// signature with a key of the issuer's set (RS256/384/512, ES256/384;
// "none" and any other alg refused; a kid the set lacks refused after at
// most one fetch), then iss, aud, sub and exp (required) and nbf with ClockSkew.
func (v *Verifier) Verify(ctx context.Context, raw string) (*Principal, error) {
	if len(raw) > MaxJWTBytes {
		return nil, fmt.Errorf("%w: %d bytes, over %d", ErrJWTMalformed, len(raw), MaxJWTBytes)
	}
	digest := sha256.Sum256([]byte(raw))
	now := v.now()
	v.verifiedMu.Lock()
	vt, ok := v.verified[digest]
	v.verifiedMu.Unlock()
	if ok {
		if now.After(vt.exp.Add(v.cfg.ClockSkew)) || now.Add(v.cfg.ClockSkew).Before(vt.nbf) {
			return nil, fmt.Errorf("%w: expired or not valid yet", ErrJWTClaims)
		}
		return vt.p, nil
	}
	p, vt, err := v.verify(ctx, raw)
	if err != nil {
		return nil, err
	}
	v.verifiedMu.Lock()
	if len(v.verified) >= v.maxVerified {
		for k := range v.verified {
			delete(v.verified, k)
			break
		}
	}
	if v.verified == nil {
		v.verified = map[[32]byte]verifiedToken{}
	}
	v.verified[digest] = vt
	v.verifiedMu.Unlock()
	return p, nil
}

func (v *Verifier) verify(ctx context.Context, raw string) (*Principal, verifiedToken, error) {
	var none verifiedToken
	h64, rest, _ := strings.Cut(raw, ".")
	c64, s64, ok := strings.Cut(rest, ".")
	if !ok || h64 == "" || c64 == "" {
		return nil, none, ErrJWTMalformed
	}
	var hdr jwtHeader
	if err := decodeSegment(h64, &hdr); err != nil {
		return nil, none, fmt.Errorf("%w: header: %v", ErrJWTMalformed, err)
	}
	hash, family := algHash(hdr.Alg)
	if family == "" {
		return nil, none, fmt.Errorf("%w: %q (RS256, RS384, RS512, ES256, ES384 are)", ErrJWTAlg, hdr.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(s64)
	if err != nil || len(sig) == 0 {
		return nil, none, fmt.Errorf("%w: signature encoding", ErrJWTMalformed)
	}
	key, err := v.key(ctx, hdr.Kid, family)
	if err != nil {
		return nil, none, err
	}
	hh := hash.New()
	hh.Write([]byte(raw[:len(h64)+1+len(c64)]))
	digest := hh.Sum(nil)
	switch k := key.(type) {
	case *rsa.PublicKey:
		if family != "RSA" || rsa.VerifyPKCS1v15(k, hash, digest, sig) != nil {
			return nil, none, ErrJWTSignature
		}
	case *ecdsa.PublicKey:
		n := (k.Curve.Params().BitSize + 7) / 8
		if family != "EC" || len(sig) != 2*n || !curveFits(hdr.Alg, k.Curve) {
			return nil, none, ErrJWTSignature
		}
		r, s := new(big.Int).SetBytes(sig[:n]), new(big.Int).SetBytes(sig[n:])
		if !ecdsa.Verify(k, digest, r, s) {
			return nil, none, ErrJWTSignature
		}
	default:
		return nil, none, ErrJWTSignature
	}
	var cl jwtClaims
	if err := decodeSegment(c64, &cl); err != nil {
		return nil, none, fmt.Errorf("%w: claims: %v", ErrJWTMalformed, err)
	}
	return v.check(&cl)
}

func (v *Verifier) check(cl *jwtClaims) (*Principal, verifiedToken, error) {
	var none verifiedToken
	if cl.Iss != v.cfg.Issuer {
		return nil, none, fmt.Errorf("%w: iss %q is not the configured issuer", ErrJWTClaims, cl.Iss)
	}
	if !audHas(cl.Aud, v.cfg.Audience) {
		return nil, none, fmt.Errorf("%w: aud does not name this server (%q)", ErrJWTClaims, v.cfg.Audience)
	}
	if cl.Sub == "" {
		// The principal is "jwt:<sub>": every door takes it for the
		// caller (an MCP session's owner, an A2A task's answerer), so
		// tokens without one would all be one caller (RFC 9068 requires
		// sub in an access token).
		return nil, none, fmt.Errorf("%w: no sub", ErrJWTClaims)
	}
	now := v.now()
	if cl.Exp == nil {
		return nil, none, fmt.Errorf("%w: no exp", ErrJWTClaims)
	}
	exp, err := cl.Exp.Float64()
	vt := verifiedToken{exp: unix(exp)}
	if err != nil || now.After(vt.exp.Add(v.cfg.ClockSkew)) {
		return nil, none, fmt.Errorf("%w: expired", ErrJWTClaims)
	}
	if cl.Nbf != nil {
		nbf, err := cl.Nbf.Float64()
		vt.nbf = unix(nbf)
		if err != nil || now.Add(v.cfg.ClockSkew).Before(vt.nbf) {
			return nil, none, fmt.Errorf("%w: not valid yet (nbf)", ErrJWTClaims)
		}
	}
	var values []string
	if cl.Scope != "" {
		values = strings.Fields(cl.Scope)
	} else if len(cl.Scp) > 0 {
		if json.Unmarshal(cl.Scp, &values) != nil {
			var one string
			if json.Unmarshal(cl.Scp, &one) == nil {
				values = strings.Fields(one)
			}
		}
	}
	p := &Principal{Name: "jwt:" + cl.Sub, Subject: cl.Sub, Agents: v.cfg.Agents}
	for _, val := range values {
		var mapped []string
		if len(v.cfg.ScopeMap) == 0 {
			if KnownScope(val) {
				mapped = []string{val}
			}
		} else {
			mapped = v.cfg.ScopeMap[val]
		}
		for _, s := range mapped {
			if !slices.Contains(p.Scopes, s) {
				p.Scopes = append(p.Scopes, s)
			}
		}
	}
	vt.p = p
	return p, vt, nil
}

func unix(f float64) time.Time {
	sec := int64(f)
	return time.Unix(sec, int64((f-float64(sec))*1e9))
}

func audHas(raw json.RawMessage, want string) bool {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one == want
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return slices.Contains(many, want)
	}
	return false
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	return dec.Decode(v)
}

func algHash(alg string) (crypto.Hash, string) {
	switch alg {
	case "RS256":
		return crypto.SHA256, "RSA"
	case "RS384":
		return crypto.SHA384, "RSA"
	case "RS512":
		return crypto.SHA512, "RSA"
	case "ES256":
		return crypto.SHA256, "EC"
	case "ES384":
		return crypto.SHA384, "EC"
	}
	return 0, ""
}

func curveFits(alg string, c elliptic.Curve) bool {
	return alg == "ES256" && c == elliptic.P256() || alg == "ES384" && c == elliptic.P384()
}

// key returns the key kid names, fetching the set when it is stale or
// lacks kid (at most once per MinRefresh). A token without kid is
// accepted only when the set has exactly one key of its family.
func (v *Verifier) key(ctx context.Context, kid, family string) (crypto.PublicKey, error) {
	if k, ok, stale := v.cached(kid, family); ok && !stale {
		return k, nil
	}
	if err := v.refresh(ctx); err != nil {
		if k, ok, _ := v.cached(kid, family); ok { // a stale set beats none
			return k, nil
		}
		return nil, err
	}
	if k, ok, _ := v.cached(kid, family); ok {
		return k, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrJWTKid, kid)
}

func (v *Verifier) cached(kid, family string) (key crypto.PublicKey, ok, stale bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	stale = v.keys == nil || v.now().Sub(v.fetched) > v.cfg.Refresh
	if kid != "" {
		key, ok = v.keys[kid]
		return key, ok, stale
	}
	n := 0
	for _, k := range v.keys {
		if keyFamily(k) == family {
			key, n = k, n+1
		}
	}
	return key, n == 1, stale
}

func keyFamily(k crypto.PublicKey) string {
	switch k.(type) {
	case *rsa.PublicKey:
		return "RSA"
	case *ecdsa.PublicKey:
		return "EC"
	}
	return ""
}

// refresh fetches the key set unless another fetch ran within MinRefresh
// (then the set it got stands).
func (v *Verifier) refresh(ctx context.Context) error {
	v.fetchMu.Lock()
	defer v.fetchMu.Unlock()
	v.mu.RLock()
	recent := !v.fetched.IsZero() && v.now().Sub(v.fetched) < v.cfg.MinRefresh
	jwksURL, lastErr := v.jwksURL, v.fetchErr
	v.mu.RUnlock()
	if recent {
		return lastErr
	}
	ctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	v.mu.Lock()
	v.fetched = v.now()
	v.mu.Unlock()
	err := v.fetchKeys(ctx, jwksURL)
	v.mu.Lock()
	v.fetchErr = err
	v.mu.Unlock()
	return err
}

// fetchKeys fetches the key set (discovering its URL first when none is
// known) and makes it the one tokens are checked with.
func (v *Verifier) fetchKeys(ctx context.Context, jwksURL string) error {
	if jwksURL == "" {
		u, err := v.discover(ctx)
		if err != nil {
			return err
		}
		jwksURL = u
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := v.getJSON(ctx, jwksURL, &set); err != nil {
		return err
	}
	keys := map[string]crypto.PublicKey{}
	for i, raw := range set.Keys {
		if len(keys) >= DefaultMaxJWKSKeys {
			break
		}
		kid, k, err := parseJWK(raw)
		if err != nil {
			continue // a key of a type we do not verify with
		}
		if kid == "" {
			kid = fmt.Sprintf("#%d", i) // reachable only by kid-less tokens
		}
		keys[kid] = k
	}
	v.mu.Lock()
	changed := !maps.EqualFunc(v.keys, keys, func(a, b crypto.PublicKey) bool {
		e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
		return ok && e.Equal(b)
	})
	v.keys, v.jwksURL = keys, jwksURL
	v.mu.Unlock()
	if changed {
		v.verifiedMu.Lock()
		clear(v.verified)
		v.verifiedMu.Unlock()
	}
	return nil
}

// discover reads jwks_uri from the issuer's metadata.
func (v *Verifier) discover(ctx context.Context) (string, error) {
	iss := strings.TrimRight(v.cfg.Issuer, "/")
	u, _ := url.Parse(iss)
	candidates := []string{
		u.Scheme + "://" + u.Host + "/.well-known/oauth-authorization-server" + u.Path, // RFC 8414
		iss + "/.well-known/openid-configuration",                                      // OpenID Connect Discovery
	}
	var errs []error
	for _, c := range candidates {
		var meta struct {
			Issuer   string `json:"issuer"`
			JWKSURI  string `json:"jwks_uri"`
			AuthURL  string `json:"authorization_endpoint"`
			TokenURL string `json:"token_endpoint"`
		}
		if err := v.getJSON(ctx, c, &meta); err != nil {
			errs = append(errs, err)
			continue
		}
		if meta.JWKSURI == "" {
			errs = append(errs, fmt.Errorf("%s has no jwks_uri", c))
			continue
		}
		if meta.Issuer != "" && strings.TrimRight(meta.Issuer, "/") != iss {
			errs = append(errs, fmt.Errorf("%s names issuer %q", c, meta.Issuer))
			continue
		}
		v.mu.Lock()
		v.authURL, v.tokenURL = meta.AuthURL, meta.TokenURL
		v.mu.Unlock()
		return meta.JWKSURI, nil
	}
	return "", fmt.Errorf("%w: discovery: %w", ErrJWKS, errors.Join(errs...))
}

func (v *Verifier) getJSON(ctx context.Context, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrJWKS, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := v.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrJWKS, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s: %s", ErrJWKS, u, resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, v.cfg.MaxJWKSBody+1))
	if err != nil {
		return fmt.Errorf("%w: GET %s: %v", ErrJWKS, u, err)
	}
	if int64(len(b)) > v.cfg.MaxJWKSBody {
		return fmt.Errorf("%w: GET %s: over %d bytes", ErrJWKS, u, v.cfg.MaxJWKSBody)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%w: GET %s: %v", ErrJWKS, u, err)
	}
	return nil
}

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func parseJWK(raw json.RawMessage) (string, crypto.PublicKey, error) {
	var k jwk
	if err := json.Unmarshal(raw, &k); err != nil {
		return "", nil, err
	}
	if k.Use != "" && k.Use != "sig" {
		return "", nil, errors.New("not a signing key")
	}
	b := func(s string) *big.Int {
		d, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			return nil
		}
		return new(big.Int).SetBytes(d)
	}
	switch k.Kty {
	case "RSA":
		n, e := b(k.N), b(k.E)
		if n == nil || e == nil || n.BitLen() < 2048 || !e.IsInt64() || e.Int64() < 3 || e.Int64() > 1<<31 {
			return "", nil, errors.New("bad RSA key (at least 2048 bits)")
		}
		return k.Kid, &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	case "EC":
		var c elliptic.Curve
		switch k.Crv {
		case "P-256":
			c = elliptic.P256()
		case "P-384":
			c = elliptic.P384()
		default:
			return "", nil, errors.New("unsupported curve")
		}
		size := (c.Params().BitSize + 7) / 8
		x, errX := base64.RawURLEncoding.DecodeString(k.X)
		y, errY := base64.RawURLEncoding.DecodeString(k.Y)
		if errX != nil || errY != nil || len(x) > size || len(y) > size {
			return "", nil, errors.New("bad EC key")
		}
		point := make([]byte, 1+2*size)
		point[0] = 4 // uncompressed
		copy(point[1+size-len(x):1+size], x)
		copy(point[1+2*size-len(y):], y)
		pk, err := ecdsa.ParseUncompressedPublicKey(c, point) // checks the point is on the curve
		if err != nil {
			return "", nil, errors.New("EC point not on the curve")
		}
		return k.Kid, pk, nil
	}
	return "", nil, errors.New("unsupported key type")
}
