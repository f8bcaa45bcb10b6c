package mcpclient

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/axocoatl/axocoatl-go/agent"
	"github.com/axocoatl/axocoatl-go/secret"
	"golang.org/x/oauth2"
)

// ErrNoToken: the store holds no token for the server.
var ErrNoToken = errors.New("no stored oauth token")

// ErrTokenKey: the token file cannot be opened with the configured key
// (another key, or a damaged file).
var ErrTokenKey = errors.New("oauth token file does not open with the configured key")

// MinTokenKeyLen is the least length of the secret the token files are
// encrypted with.
const MinTokenKeyLen = 16

// TokenStore keeps each server's OAuth tokens between runs ([Config].Tokens).
type TokenStore interface {
	Load(server string) (StoredToken, error)
	Save(server string, rec StoredToken) error
}

// StoredToken is what a server's token file holds: the token and what
// refreshing it needs (the client a dynamic registration made included).
type StoredToken struct {
	Token        *oauth2.Token `json:"token"`
	TokenURL     string        `json:"token_url"`
	AuthURL      string        `json:"auth_url,omitempty"`
	AuthStyle    int           `json:"auth_style,omitempty"`
	ClientID     string        `json:"client_id"`
	ClientSecret string        `json:"client_secret,omitempty"`
	Scopes       []string      `json:"scopes,omitempty"`
	RedirectURL  string        `json:"redirect_url,omitempty"`
}

func (r StoredToken) oauth2Config() *oauth2.Config {
	return &oauth2.Config{ClientID: r.ClientID, ClientSecret: r.ClientSecret, Scopes: r.Scopes, RedirectURL: r.RedirectURL,
		Endpoint: oauth2.Endpoint{TokenURL: r.TokenURL, AuthURL: r.AuthURL, AuthStyle: oauth2.AuthStyle(r.AuthStyle)}}
}

// FileTokenStore keeps one file per server, <dir>/<server>.token, mode
// 0600, sealed with AES-256-GCM under a key derived (HKDF-SHA256) from a
// secret; the server's name is the additional data, so a file moved to
// another server's name does not open.
type FileTokenStore struct {
	dir  string
	aead cipher.AEAD
}

// NewFileTokenStore returns a store in dir (created 0700 on first save)
// whose files are sealed with key (at least [MinTokenKeyLen] characters).
func NewFileTokenStore(dir string, key secret.Secret) (*FileTokenStore, error) {
	if len(key.Reveal()) < MinTokenKeyLen {
		return nil, fmt.Errorf("%w: the oauth token key must have at least %d characters", ErrInvalidConfig, MinTokenKeyLen)
	}
	k, err := hkdf.Key(sha256.New, []byte(key.Reveal()), nil, "axocoatl mcpclient oauth tokens v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &FileTokenStore{dir: dir, aead: aead}, nil
}

func (s *FileTokenStore) path(server string) (string, error) {
	if !agent.ValidID(server) {
		return "", fmt.Errorf("invalid server name %q", server)
	}
	return filepath.Join(s.dir, server+".token"), nil
}

// maxTokenFile bounds a token file read back.
const maxTokenFile = 1 << 20

// Load reads and opens the server's file; [ErrNoToken] if there is none.
func (s *FileTokenStore) Load(server string) (StoredToken, error) {
	var rec StoredToken
	p, err := s.path(server)
	if err != nil {
		return rec, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, ErrNoToken
	}
	if err != nil {
		return rec, err
	}
	n := s.aead.NonceSize()
	if len(b) > maxTokenFile || len(b) < n+s.aead.Overhead() {
		return rec, fmt.Errorf("%s: %w", p, ErrTokenKey)
	}
	plain, err := s.aead.Open(nil, b[:n], b[n:], []byte(server))
	if err != nil {
		return rec, fmt.Errorf("%s: %w", p, ErrTokenKey)
	}
	if err := json.Unmarshal(plain, &rec); err != nil || rec.Token == nil {
		return StoredToken{}, fmt.Errorf("%s: %w", p, ErrTokenKey)
	}
	return rec, nil
}

// Save seals rec into the server's file, replacing it atomically.
func (s *FileTokenStore) Save(server string, rec StoredToken) error {
	p, err := s.path(server)
	if err != nil {
		return err
	}
	plain, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	sealed := s.aead.Seal(nonce, nonce, plain, []byte(server))
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(s.dir, "."+server+".token-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(sealed); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
