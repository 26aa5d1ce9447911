// Package docs checks the documentation: README.md and docs/*.md.
package docs

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// pages returns README.md and every docs/*.md, relative to root.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md")
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out
}

// page is what the check needs of one Markdown file.
type page struct {
	anchors map[string]bool
	links   []link
}

type link struct {
	line   int
	target string
}

var (
	headingRE = regexp.MustCompile(`^#{1,6}[ \t]+(.*?)[ \t#]*$`)
	// An inline link or image: ](target) or ](target "title").
	inlineRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// A reference definition: [label]: target
	refDefRE = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	codeRE   = regexp.MustCompile("`+[^`]*`+")
	// Explicit anchors: <a name="x"> or <a id="x">.
	explicitRE = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// parse reads a Markdown file's headings (as GitHub's anchors) and links,
// outside fenced code blocks and code spans.
func parse(text string) page {
	p := page{anchors: map[string]bool{}}
	seen := map[string]int{}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		for _, m := range explicitRE.FindAllStringSubmatch(line, -1) {
			p.anchors[m[1]] = true
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			slug := Slug(m[1])
			// GitHub numbers repeated headings: x, x-1, x-2.
			if n := seen[slug]; n > 0 {
				p.anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				p.anchors[slug] = true
			}
			seen[slug]++
		}
		if m := refDefRE.FindStringSubmatch(line); m != nil {
			p.links = append(p.links, link{i + 1, m[1]})
			continue
		}
		for _, m := range inlineRE.FindAllStringSubmatch(codeRE.ReplaceAllString(line, "code"), -1) {
			p.links = append(p.links, link{i + 1, m[1]})
		}
	}
	return p
}

// Slug is GitHub's anchor for a heading: its text lowercased, without
// Markdown's emphasis and code marks, links reduced to their text, every
// character but letters, digits, spaces, '-' and '_' dropped, and spaces
// turned into '-'.
func Slug(heading string) string {
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"`leasehold serve` flags":                        "leasehold-serve-flags",
		"The live view: `/ui/`":                          "the-live-view-ui",
		"7. On three machines, with the Debian package":  "7-on-three-machines-with-the-debian-package",
		"HTTP/2 under attack":                            "http2-under-attack",
		"Deployment: three etcd members, three replicas": "deployment-three-etcd-members-three-replicas",
		"`leasehold lock NAME -- COMMAND [ARG...]`":      "leasehold-lock-name----command-arg",
		"ABAC or RBAC?":                                  "abac-or-rbac",
		"snake_case and [a link](x.md)":                  "snake_case-and-a-link",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLinks: every relative link of README.md and docs/*.md names a file
// that exists and, with a #fragment into a Markdown page, a heading of
// that page; and every docs/*.md page is linked from README.md.
func TestLinks(t *testing.T) {
	names := pages(t)
	parsed := map[string]page{}
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		parsed[name] = parse(string(b))
	}
	fromReadme := map[string]bool{}
	for _, name := range names {
		for _, l := range parsed[name].links {
			if err := check(name, l.target, parsed); err != nil {
				t.Errorf("%s:%d: link %q: %v", name, l.line, l.target, err)
			}
			if name == "README.md" {
				if u, err := url.Parse(l.target); err == nil && u.Scheme == "" && u.Path != "" {
					fromReadme[filepath.ToSlash(filepath.Clean(u.Path))] = true
				}
			}
		}
	}
	for _, name := range names {
		if name != "README.md" && !fromReadme[name] {
			t.Errorf("%s is not linked from README.md", name)
		}
	}
}

// check resolves one link target found in page from.
func check(from, target string, parsed map[string]page) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	if u.Scheme != "" || strings.HasPrefix(target, "//") {
		return nil // external: not checked here
	}
	dest := from
	if u.Path != "" {
		if strings.HasPrefix(u.Path, "/") {
			return fmt.Errorf("absolute path: use a path relative to %s", from)
		}
		dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(from), u.Path)))
		if strings.HasPrefix(dest, "../") {
			return fmt.Errorf("leaves the repository")
		}
		if _, known := parsed[dest]; !known {
			if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
				return fmt.Errorf("no such file %s", dest)
			}
		}
	}
	if u.Fragment == "" {
		if strings.HasSuffix(target, "#") {
			return fmt.Errorf("empty anchor")
		}
		return nil
	}
	p, ok := parsed[dest]
	if !ok {
		if !strings.HasSuffix(dest, ".md") {
			return fmt.Errorf("anchor into %s, which is not a Markdown page", dest)
		}
		b, err := os.ReadFile(filepath.Join(root, dest))
		if err != nil {
			return err
		}
		p = parse(string(b))
		parsed[dest] = p
	}
	if !p.anchors[u.Fragment] {
		return fmt.Errorf("%s has no heading with anchor #%s (it has: %s)", dest, u.Fragment, anchorList(p))
	}
	return nil
}

func anchorList(p page) string {
	var a []string
	for k := range p.anchors {
		a = append(a, k)
	}
	slices.Sort(a)
	if len(a) > 12 {
		a = append(a[:12], "...")
	}
	return strings.Join(a, ", ")
}

// TestBrokenLinksFail: the check finds what it must.
func TestBrokenLinksFail(t *testing.T) {
	parsed := map[string]page{
		"README.md":    parse("# Title\n\n## A section\n\n```sh\n# not a heading\n```\n"),
		"docs/page.md": parse("# Page\n\n## Part one\n\n## Part one\n"),
	}
	for _, tc := range []struct {
		target string
		ok     bool
	}{
		{"#a-section", true},
		{"#not-a-heading", false},
		{"#title", true},
		{"#missing", false},
		{"docs/page.md#part-one", true},
		{"docs/page.md#part-one-1", true},
		{"docs/page.md#part-two", false},
		{"docs/missing.md", false},
		{"https://example.com/x#y", true},
	} {
		err := check("README.md", tc.target, parsed)
		if (err == nil) != tc.ok {
			t.Errorf("check(%q) = %v, want ok %v", tc.target, err, tc.ok)
		}
	}
	// Links in code are not links.
	if p := parse("see `[x](#nowhere)` and\n```\n[y](#nowhere)\n```\n"); len(p.links) != 0 {
		t.Errorf("links found in code: %v", p.links)
	}
}
