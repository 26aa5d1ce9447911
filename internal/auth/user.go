package auth

// User is an authenticated client.
type User struct {
	Name   string
	UID    string
	Groups []string
}
