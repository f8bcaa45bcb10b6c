package mcpclient

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	_ "crypto/sha256" // ES256, RS256
	_ "crypto/sha512" // ES384
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// ClientAssertionType is the client_assertion_type of private_key_jwt
// client authentication (RFC 7523 section 2.2).
const ClientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// ClientAssertionLifetime is how long a client assertion is valid (its
// exp past its iat). Each token request signs a new one.
const ClientAssertionLifetime = time.Minute

// MaxTokenAnswerBytes bounds a token endpoint's answer to a
// private_key_jwt client: past it the token request fails.
const MaxTokenAnswerBytes = 64 << 10

// assertionKey is a parsed `private_key`: the signer and its JWS alg.
type assertionKey struct {
	signer crypto.Signer
	alg    string // ES256, ES384 or RS256
}

// parseAssertionKey reads a PEM private key (PKCS#8, SEC 1 or PKCS#1):
// an EC P-256 (ES256) or P-384 (ES384) key, or an RSA key of at least 2048
// bits (RS256). Its errors never quote the key.
func parseAssertionKey(pemText string) (*assertionKey, error) {
	block, _ := pem.Decode([]byte(strings.TrimSpace(pemText)))
	if block == nil {
		return nil, errors.New("is not a PEM private key")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("is a PEM %q block; want PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY", truncate(block.Type, 40))
	}
	if err != nil {
		return nil, errors.New("is not a readable private key")
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			return &assertionKey{signer: k, alg: "ES256"}, nil
		case elliptic.P384():
			return &assertionKey{signer: k, alg: "ES384"}, nil
		}
		return nil, errors.New("is an EC key on a curve other than P-256 or P-384")
	case *rsa.PrivateKey:
		if k.N.BitLen() < 2048 {
			return nil, fmt.Errorf("is an RSA key of %d bits; at least 2048 are needed", k.N.BitLen())
		}
		return &assertionKey{signer: k, alg: "RS256"}, nil
	}
	return nil, fmt.Errorf("is a %T; want an EC or RSA key", key)
}

// sign makes a client assertion: iss and sub the client_id, aud the
// authorization server's issuer (RFC 7523bis; the token endpoint too, for
// servers of RFC 7523's first reading), a minute of life, a fresh jti.
func (k *assertionKey) sign(clientID, kid string, aud []string, now time.Time) (string, error) {
	hdr := map[string]string{"alg": k.alg, "typ": "JWT"}
	if kid != "" {
		hdr["kid"] = kid
	}
	var audClaim any = aud
	if len(aud) == 1 {
		audClaim = aud[0]
	}
	claims := map[string]any{"iss": clientID, "sub": clientID, "aud": audClaim, "iat": now.Unix(),
		"exp": now.Add(ClientAssertionLifetime).Unix(), "jti": rand.Text()}
	h, _ := json.Marshal(hdr)
	c, _ := json.Marshal(claims)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	var hash crypto.Hash = crypto.SHA256
	if k.alg == "ES384" {
		hash = crypto.SHA384
	}
	hh := hash.New()
	hh.Write([]byte(input))
	digest := hh.Sum(nil)
	var sig []byte
	switch key := k.signer.(type) {
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, key, digest)
		if err != nil {
			return "", err
		}
		size := (key.Curve.Params().BitSize + 7) / 8
		sig = append(fixed(r, size), fixed(s, size)...)
	case *rsa.PrivateKey:
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, key, hash, digest); err != nil {
			return "", err
		}
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

func fixed(n *big.Int, size int) []byte {
	b := make([]byte, size)
	return n.FillBytes(b)
}

// jwtClientHandler is the client credentials grant with private_key_jwt
// client authentication (RFC 7523), which the go-sdk's
// ClientCredentialsHandler lacks: on a 401 it finds the protected resource
// metadata (RFC 9728) and the authorization server's (RFC 8414) as that
// handler does, then asks the token endpoint with a signed assertion (and
// the resource indicator, RFC 8707). An access token is reused until
// shortly before it expires, then a new one is asked for with a new
// assertion (the grant has no refresh token).
type jwtClientHandler struct {
	clientID string
	kid      string
	key      *assertionKey
	http     *http.Client

	mu  sync.Mutex
	src oauth2.TokenSource
}

func (h *jwtClientHandler) TokenSource(context.Context) (oauth2.TokenSource, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.src, nil
}

func (h *jwtClientHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	defer resp.Body.Close()
	defer func() { _, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) }()
	challenges, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return fmt.Errorf("oauth: the server's WWW-Authenticate: %w", err)
	}
	resource := req.URL.String()
	prm := h.resourceMetadata(ctx, challenges, resource)
	if prm == nil {
		u := *req.URL
		u.Path, u.RawQuery, u.Fragment = "", "", ""
		prm = &oauthex.ProtectedResourceMetadata{Resource: resource, AuthorizationServers: []string{u.String()}}
	}
	if len(prm.AuthorizationServers) == 0 {
		return errors.New("oauth: the protected resource metadata names no authorization server")
	}
	asm, err := auth.GetAuthServerMetadata(ctx, prm.AuthorizationServers[0], h.http)
	if err != nil {
		return fmt.Errorf("oauth: authorization server metadata: %w", err)
	}
	if asm == nil {
		base := strings.TrimRight(prm.AuthorizationServers[0], "/")
		asm = &oauthex.AuthServerMeta{Issuer: base, TokenEndpoint: base + "/token"}
	}
	if tu, err := url.Parse(asm.TokenEndpoint); err != nil || (tu.Scheme != "https" && !(tu.Scheme == "http" && loopbackHost(tu.Hostname()))) {
		return fmt.Errorf("oauth: the token endpoint %q is not https (http is for loopback hosts only)", redactURL(asm.TokenEndpoint))
	}
	if m := asm.TokenEndpointAuthMethodsSupported; len(m) > 0 && !slices.Contains(m, "private_key_jwt") {
		return fmt.Errorf("oauth: the authorization server %s does not accept private_key_jwt (it lists %s)", asm.Issuer, strings.Join(m, ", "))
	}
	if a := asm.TokenEndpointAuthSigningAlgValuesSupported; len(a) > 0 && !slices.Contains(a, h.key.alg) {
		return fmt.Errorf("oauth: the authorization server %s does not accept %s client assertions (it lists %s)", asm.Issuer, h.key.alg, strings.Join(a, ", "))
	}
	scopes := scopesOf(challenges)
	if len(scopes) == 0 {
		scopes = prm.ScopesSupported
	}
	ts := &assertionSource{h: h, ctx: context.WithoutCancel(ctx), tokenURL: asm.TokenEndpoint, issuer: asm.Issuer,
		resource: prm.Resource, scopes: slices.Clone(scopes)}
	tok, err := ts.Token()
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.src = oauth2.ReuseTokenSourceWithExpiry(tok, ts, DefaultRefreshEarly)
	h.mu.Unlock()
	return nil
}

// resourceMetadata tries the challenge's resource_metadata, then the
// well-known URLs at the endpoint's path and at the root.
func (h *jwtClientHandler) resourceMetadata(ctx context.Context, challenges []oauthex.Challenge, resource string) *oauthex.ProtectedResourceMetadata {
	var urls []string
	for _, c := range challenges {
		if u := c.Params["resource_metadata"]; u != "" {
			urls = append(urls, u)
			break
		}
	}
	if ru, err := url.Parse(resource); err == nil {
		mu := *ru
		mu.RawQuery, mu.Fragment = "", ""
		mu.Path = "/.well-known/oauth-protected-resource/" + strings.TrimLeft(ru.Path, "/")
		urls = append(urls, mu.String())
		mu.Path = "/.well-known/oauth-protected-resource"
		urls = append(urls, mu.String())
	}
	for i, u := range urls {
		res := resource
		if i == len(urls)-1 && len(urls) > 1 { // the root's metadata describes the root
			if ru, err := url.Parse(resource); err == nil {
				ru.Path, ru.RawQuery = "", ""
				res = ru.String()
			}
		}
		if prm, err := oauthex.GetProtectedResourceMetadata(ctx, u, res, h.http); err == nil && prm != nil {
			return prm
		}
	}
	return nil
}

func scopesOf(cs []oauthex.Challenge) []string {
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params["scope"] != "" {
			return strings.Fields(c.Params["scope"])
		}
	}
	return nil
}

// assertionSource asks the token endpoint for an access token with a new
// client assertion each time.
type assertionSource struct {
	h                *jwtClientHandler
	ctx              context.Context
	tokenURL, issuer string
	resource         string
	scopes           []string
}

func (s *assertionSource) Token() (*oauth2.Token, error) {
	aud := []string{s.issuer}
	if s.tokenURL != s.issuer {
		aud = append(aud, s.tokenURL)
	}
	assertion, err := s.h.key.sign(s.h.clientID, s.h.kid, aud, time.Now())
	if err != nil {
		return nil, fmt.Errorf("oauth: signing the client assertion: %w", err)
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {s.h.clientID},
		"client_assertion_type": {ClientAssertionType}, "client_assertion": {assertion}}
	if len(s.scopes) > 0 {
		form.Set("scope", strings.Join(s.scopes, " "))
	}
	if s.resource != "" {
		form.Set("resource", s.resource)
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.h.http.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("oauth: token endpoint: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := s.h.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("oauth: token endpoint: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxTokenAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("oauth: token endpoint: %w", err)
	}
	if len(body) > MaxTokenAnswerBytes {
		return nil, fmt.Errorf("oauth: token endpoint: the answer is over %d bytes", MaxTokenAnswerBytes)
	}
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	_ = json.Unmarshal(body, &tr)
	if resp.StatusCode != http.StatusOK || tr.AccessToken == "" {
		code := tr.Error
		if code == "" {
			code = "no access_token"
		}
		return nil, &oauth2.RetrieveError{Response: &http.Response{StatusCode: resp.StatusCode}, ErrorCode: code,
			ErrorDescription: truncate(tr.Description, 200)}
	}
	if tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer") {
		return nil, fmt.Errorf("oauth: token endpoint: token_type %q, want Bearer", truncate(tr.TokenType, 40))
	}
	tok := &oauth2.Token{AccessToken: tr.AccessToken, TokenType: "Bearer"}
	if tr.ExpiresIn > 0 {
		tok.Expiry = time.Now().Add(time.Duration(tr.ExpiresIn) * time.Second)
	}
	return tok, nil
}

// loopbackHost reports whether host is localhost or a loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}
