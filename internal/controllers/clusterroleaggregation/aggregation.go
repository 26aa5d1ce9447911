// Package clusterroleaggregation keeps the rules of aggregated
// ClusterRoles (those with an aggregationRule, such as admin, edit and
// view) up to date, the work kube-controller-manager's
// ClusterRoleAggregation controller does in a Kubernetes cluster
// (pkg/controller/clusterroleaggregation): whenever any ClusterRole
// changes, the rules of each aggregated role become those of the roles its
// selectors select, and are written with server-side apply by the field
// manager "clusterrole-aggregation-controller", forcing ownership.
package clusterroleaggregation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/internal/controllers"
	"github.com/leasehold/leasehold/internal/rbac"
	"github.com/leasehold/leasehold/internal/registry"
	"github.com/leasehold/leasehold/internal/resources"
)

// fieldManager is the manager of the rules it writes, kube-apiserver's.
const fieldManager = "clusterrole-aggregation-controller"

// New returns the controller.
func New(reg *registry.Registry, log *slog.Logger) controllers.Controller {
	return controllers.Controller{
		Name:      "clusterrole-aggregation",
		Singleton: true,
		Run: func(ctx context.Context) error {
			c, err := newController(reg, log)
			if err != nil {
				return err
			}
			return c.run(ctx)
		},
	}
}

// AggregateAll aggregates every aggregated ClusterRole once: the server
// runs it at start, after creating the bootstrap roles, so that admin,
// edit and view have their rules before it answers requests.
func AggregateAll(ctx context.Context, reg *registry.Registry, log *slog.Logger) error {
	c, err := newController(reg, log)
	if err != nil {
		return err
	}
	_, err = c.syncAll(ctx)
	return err
}

func newController(reg *registry.Registry, log *slog.Logger) (*controller, error) {
	res, ok := reg.ResourceFor(schema.GroupKind{Group: rbacv1.GroupName, Kind: "ClusterRole"})
	if !ok {
		return nil, errors.New("cluster roles are not served")
	}
	return &controller{reg: reg, log: log, roles: res}, nil
}

type controller struct {
	reg   *registry.Registry
	log   *slog.Logger
	roles resources.Resource
}

// run aggregates every aggregated role, then waits for a ClusterRole to
// change, and again. A role that fails to update is retried with the next
// change, or after retry.
func (c *controller) run(ctx context.Context) error {
	for {
		rev, err := c.syncAll(ctx)
		if err != nil && rev == 0 {
			return err
		}
		var wait time.Duration
		if err != nil {
			if ctx.Err() == nil {
				c.log.Warn("aggregating cluster roles", "err", err)
			}
			wait = retry
		}
		if err := controllers.WaitForChange(ctx, c.reg, c.roles, rev, wait); err != nil {
			return err
		}
	}
}

// retry is how long the controller waits before trying again a role it
// could not update, when nothing else changes meanwhile.
const retry = time.Second

// syncAll lists the ClusterRoles and syncs each, in passes until one
// changes nothing: a role may aggregate another aggregated role (admin
// gathers edit, which gathers view), and each pass reads what the one
// before wrote. It returns the revision of the list (0 when the list
// failed) and what failed.
func (c *controller) syncAll(ctx context.Context) (int64, error) {
	list, err := c.reg.List(ctx, c.roles, "", &metainternalversion.ListOptions{})
	if err != nil {
		return 0, err
	}
	roles := make([]*rbacv1.ClusterRole, len(list.Items))
	for i, item := range list.Items {
		roles[i] = item.Object().(*rbacv1.ClusterRole)
	}
	// Each pass that changes something settles at least one more level of
	// nesting, so len(roles)+1 passes always end (a cycle of aggregations
	// settles too: rules only accumulate).
	for pass := 0; pass <= len(roles); pass++ {
		var errs []error
		changed := false
		for i, r := range roles {
			updated, err := c.sync(ctx, r, roles)
			if err != nil {
				errs = append(errs, fmt.Errorf("clusterrole %s: %w", r.Name, err))
			}
			if updated != nil {
				roles[i], changed = updated, true
			}
		}
		if len(errs) > 0 || !changed {
			return list.ResourceVersion, errors.Join(errs...)
		}
	}
	return list.ResourceVersion, nil
}

// sync gives r, when aggregated, the rules its selectors gather; it
// returns r as written when it changed.
func (c *controller) sync(ctx context.Context, r *rbacv1.ClusterRole, roles []*rbacv1.ClusterRole) (*rbacv1.ClusterRole, error) {
	rules, ok, err := rbac.Aggregate(r, roles)
	if !ok || err != nil {
		return nil, err
	}
	if equality.Semantic.DeepEqual(rules, r.Rules) {
		return nil, nil
	}
	apply, err := json.Marshal(map[string]any{
		"apiVersion": rbacv1.SchemeGroupVersion.String(),
		"kind":       "ClusterRole",
		"metadata":   map[string]any{"name": r.Name},
		"rules":      rules,
	})
	if err != nil {
		return nil, err
	}
	_, err = c.reg.Patch(ctx, c.roles, "", r.Name, "", types.ApplyYAMLPatchType, apply,
		registry.PatchOptions{WriteOptions: registry.WriteOptions{Manager: fieldManager}, Force: true, FieldValidation: metav1.FieldValidationStrict})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	updated := r.DeepCopy()
	updated.Rules = rules
	return updated, nil
}
