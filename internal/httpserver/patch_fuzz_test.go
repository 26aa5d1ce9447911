package httpserver

import (
	"testing"
)

// FuzzPatch applies patches of each type (JSON patch, merge patch,
// strategic merge patch, server-side apply) to an existing object of each
// resource, as dry runs: the registry's patch application (and, for
// apply, structured-merge-diff) sees every input.
func FuzzPatch(f *testing.F) {
	p := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, patch []byte, patchType, kind, validation uint8, force bool) {
		target := fuzzKinds[int(kind)%len(fuzzKinds)].seed + "?dryRun=All&fieldManager=fuzz&fieldValidation=" +
			fuzzFieldValidation[int(validation)%len(fuzzFieldValidation)]
		if force {
			target += "&force=true"
		}
		before := p.revision(t)
		contentType := fuzzPatchTypes[int(patchType)%len(fuzzPatchTypes)]
		w := p.do("PATCH", target, contentType, patch)
		p.checkAnswer(t, w, "PATCH "+target)
		if after := p.revision(t); after != before {
			t.Fatalf("PATCH %s changed the store: revision %d, then %d", target, before, after)
		}
	})
}

var fuzzPatchTypes = []string{
	"application/json-patch+json",
	"application/merge-patch+json",
	"application/strategic-merge-patch+json",
	"application/apply-patch+yaml",
}
