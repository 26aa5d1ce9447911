package auth

// Attributes describe one request to authorize, as kube-apiserver's
// authorizer.Attributes do.
type Attributes struct {
	User User
	// Verb is a Kubernetes verb (get, list, watch, create, update, patch,
	// delete, deletecollection) for resource requests, and the lower-case
	// HTTP method for the others.
	Verb string
	// ResourceRequest is true for requests to API resources; the others
	// are identified by Path.
	ResourceRequest bool
	Path            string

	APIGroup    string
	APIVersion  string
	Resource    string
	Subresource string
	// Namespace is empty for cluster-scoped resources and for requests
	// across all namespaces.
	Namespace string
	Name      string
}

// IsReadOnly reports whether the verb only reads: get, list or watch.
func (a Attributes) IsReadOnly() bool {
	return a.Verb == "get" || a.Verb == "list" || a.Verb == "watch"
}

// Decision is an authorizer's answer.
type Decision int

// Decisions, as in k8s.io/apiserver/pkg/authorization/authorizer.
const (
	// DecisionDeny refuses the request, whatever other authorizers say.
	DecisionDeny Decision = iota
	// DecisionAllow allows the request.
	DecisionAllow
	// DecisionNoOpinion leaves the request to the next authorizer; the
	// last one's no opinion refuses it.
	DecisionNoOpinion
)

// ResourceRule is one rule of a rules review: the verbs allowed on
// resources (and, when ResourceNames is not empty, only on the objects
// named); "*" matches all.
type ResourceRule struct {
	Verbs         []string
	APIGroups     []string
	Resources     []string
	ResourceNames []string
}

// NonResourceRule is one rule of a rules review: the verbs allowed on
// paths; a trailing "*" matches a prefix.
type NonResourceRule struct {
	Verbs           []string
	NonResourceURLs []string
}

// Rules is what a user may do in a namespace, for SelfSubjectRulesReview.
type Rules struct {
	Resource    []ResourceRule
	NonResource []NonResourceRule
}
