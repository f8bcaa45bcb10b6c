package main

import (
	"errors"
	"net/http"

	"github.com/axocoatl/axocoatl-go/examples/daemon/dashboard"
)

// dashboardModule mounts the embedded page at / (public, per the contract:
// the page holds no data; it reads the API with the token the user gives).
func dashboardModule() module {
	return module{
		name: "dashboard",
		routes: func(_ *daemon, m *mux) error {
			h := dashboard.Handler()
			return errors.Join(
				m.public(http.MethodGet, "/", h),
				m.public(http.MethodHead, "/", h),
			)
		},
	}
}
