package dashboard_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The dashboard shows only what its token can do (issue #29): with a read
// token limited to support-* agents, the page lists support-a alone, names
// the token, and hides the run form, a conversation's send and delete and
// the verdict buttons; the admin token shows them.
func TestDashboardShowsOnlyWhatTheTokenCan(t *testing.T) {
	bin := buildDaemon(t)
	cfg := filepath.Join(t.TempDir(), "axocoatl.yaml")
	const reader, admin = "reader-token-0123456789abc", "admin-token-0123456789abcdef"
	if err := os.WriteFile(cfg, []byte(`
server:
  api_token: `+admin+`
  tokens:
    - {name: reader, token: `+reader+`, scopes: [read], agents: ["support-*"]}
agents:
  - id: support-a
  - id: billing
`), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, bin, "AXOCOATL_CONFIG="+cfg)
	b := newBrowser(t)
	b.do(t, "load the page", chromedp.Navigate(d.URL))
	b.waitFor(t, "the token prompt", `!document.getElementById('auth').hidden`)
	b.do(t, "enter the read token",
		chromedp.SendKeys(chromedp.ID("token"), reader),
		chromedp.Click(chromedp.CSS("#auth button")))
	b.waitFor(t, "support-a's row", `document.querySelector('#agents tr[data-agent="support-a"]')`)
	who := b.waitFor(t, "the token's name", `document.getElementById('whoami').textContent`)
	if !strings.Contains(who, "reader") {
		t.Errorf("whoami shows %q", who)
	}
	if got := b.eval(t, `document.querySelector('#agents tr[data-agent="billing"]') ? 'shown' : 'absent'`); got != "absent" {
		t.Errorf("billing is %s to a support-* token", got)
	}
	if got := b.waitFor(t, "the scopes it lacks", `document.body.dataset.cannot`); got != "execute approve admin" {
		t.Errorf("data-cannot = %q", got)
	}
	for _, id := range []string{"run", "conv-form", "conv-delete"} {
		if got := b.eval(t, `getComputedStyle(document.getElementById('`+id+`')).display`); got != "none" {
			t.Errorf("#%s is displayed (%s) for a read token", id, got)
		}
	}
	b.checkConsole(t)

	// The admin token: everything is there again.
	b.eval(t, `(sessionStorage.setItem('axocoatl.token', '`+admin+`'), setTimeout(() => location.reload(), 0), '')`)
	b.waitFor(t, "billing's row", `document.querySelector('#agents tr[data-agent="billing"]')`)
	b.waitFor(t, "no scope lacking", `document.body.dataset.cannot === '' && document.getElementById('whoami').textContent.includes('api_token')`)
	if got := b.eval(t, `getComputedStyle(document.getElementById('run')).display`); got == "none" {
		t.Error("the run form is hidden for the admin token")
	}
}
