package namespace

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leasehold/leasehold/internal/codec"
	"github.com/leasehold/leasehold/internal/resources"
)

// The status conditions of a terminating namespace, with the types,
// reasons and messages of kube-controller-manager's namespace controller
// (pkg/controller/namespace/deletion/status_condition_utils.go), so that
// kubectl describe says what holds a namespace. leasehold discovers its
// kinds in-process, so the discovery and group-version conditions are
// always in their "ok" state.

// conditionTypes are the conditions the controller maintains, in order.
var conditionTypes = []corev1.NamespaceConditionType{
	corev1.NamespaceDeletionDiscoveryFailure,
	corev1.NamespaceDeletionGVParsingFailure,
	corev1.NamespaceDeletionContentFailure,
	corev1.NamespaceContentRemaining,
	corev1.NamespaceFinalizersRemaining,
}

// okConditions are the reasons and messages of conditions that hold no
// problem.
var okConditions = map[corev1.NamespaceConditionType][2]string{
	corev1.NamespaceDeletionDiscoveryFailure: {"ResourcesDiscovered", "All resources successfully discovered"},
	corev1.NamespaceDeletionGVParsingFailure: {"ParsedGroupVersions", "All legacy kube types successfully parsed"},
	corev1.NamespaceDeletionContentFailure:   {"ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	corev1.NamespaceContentRemaining:         {"ContentRemoved", "All content successfully removed"},
	corev1.NamespaceFinalizersRemaining:      {"ContentRemoved", "All content successfully removed"},
}

// remaining is what a round of deleting a namespace's content left.
type remaining struct {
	// failures are the errors of kinds whose content could not be
	// deleted.
	failures []string
	// byResource counts the objects left per resource
	// ("leases.coordination.k8s.io"); byFinalizer the objects left per
	// finalizer that holds them.
	byResource  map[string]int
	byFinalizer map[string]int
}

// add counts the objects of res still in the namespace.
func (r *remaining) add(res resources.Resource, items []codec.Cached) {
	if len(items) == 0 {
		return
	}
	if r.byResource == nil {
		r.byResource, r.byFinalizer = map[string]int{}, map[string]int{}
	}
	// kube-controller-manager writes "<resource>.<group>", a trailing
	// dot for the core group.
	r.byResource[res.Kind.Names.Plural+"."+res.Version.Group] += len(items)
	for _, o := range items {
		for _, f := range o.Object().GetFinalizers() {
			r.byFinalizer[f]++
		}
	}
}

func (r *remaining) empty() bool { return len(r.failures) == 0 && len(r.byResource) == 0 }

// conditions returns the conditions that describe r; those not listed
// are in their ok state.
func (r *remaining) conditions(now time.Time) []corev1.NamespaceCondition {
	var out []corev1.NamespaceCondition
	add := func(t corev1.NamespaceConditionType, reason, message string) {
		out = append(out, corev1.NamespaceCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now), Reason: reason, Message: message})
	}
	if len(r.failures) > 0 {
		msgs := append([]string(nil), r.failures...)
		sort.Strings(msgs)
		add(corev1.NamespaceDeletionContentFailure, "ContentDeletionFailed",
			fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(msgs), strings.Join(msgs, ", ")))
	}
	if len(r.byResource) > 0 {
		add(corev1.NamespaceContentRemaining, "SomeResourcesRemain",
			"Some resources are remaining: "+counted(r.byResource, "%s has %d resource instances"))
	}
	if len(r.byFinalizer) > 0 {
		add(corev1.NamespaceFinalizersRemaining, "SomeFinalizerRemain",
			"Some finalizers are remaining: "+counted(r.byFinalizer, "%s in %d resource instances"))
	}
	return out
}

// counted words counts, sorted so that the message stays the same while
// nothing changes.
func counted(counts map[string]int, format string) string {
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf(format, k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// mergeConditions sets every maintained condition of status to the one in
// conds, or to its ok state, keeping lastTransitionTime unless the status
// flips. It reports whether anything changed.
func mergeConditions(status *corev1.NamespaceStatus, conds []corev1.NamespaceCondition, now time.Time) (changed bool) {
	for _, t := range conditionTypes {
		want, ok := find(conds, t)
		if !ok {
			want = corev1.NamespaceCondition{Type: t, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now),
				Reason: okConditions[t][0], Message: okConditions[t][1]}
		}
		i := indexOf(status.Conditions, t)
		switch {
		case i < 0:
			status.Conditions = append(status.Conditions, want)
			changed = true
		case status.Conditions[i].Status != want.Status || status.Conditions[i].Reason != want.Reason || status.Conditions[i].Message != want.Message:
			old := &status.Conditions[i]
			if old.Status != want.Status {
				old.LastTransitionTime = want.LastTransitionTime
			}
			old.Status, old.Reason, old.Message = want.Status, want.Reason, want.Message
			changed = true
		}
	}
	return changed
}

func find(conds []corev1.NamespaceCondition, t corev1.NamespaceConditionType) (corev1.NamespaceCondition, bool) {
	if i := indexOf(conds, t); i >= 0 {
		return conds[i], true
	}
	return corev1.NamespaceCondition{}, false
}

func indexOf(conds []corev1.NamespaceCondition, t corev1.NamespaceConditionType) int {
	for i := range conds {
		if conds[i].Type == t {
			return i
		}
	}
	return -1
}
