// Package webui is leasehold's live web view, served at /ui/: one page
// (static HTML, CSS and JavaScript embedded in the binary, no external
// fetches) that lists the leases and endpoints and follows them through
// watches of the API, as any client would. The files need no credentials;
// the page's API requests carry a bearer token the user pastes, or passes
// in the URL fragment (/ui/#token=...), which browsers never send to the
// server. The page keeps it in the tab's sessionStorage only, and removes
// it from the address bar. Its answers carry the server's clock in
// milliseconds (TimeHeader), for the page's countdowns; the leases' holder
// histories come from the API server's /leasehold/v1/leasehistory.
package webui
