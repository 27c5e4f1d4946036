package hooks_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/agent/hooks"
	"github.com/planround/planround/memory"
)

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

func link(target string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink}
}

func TestLoad(t *testing.T) {
	fsys := fstest.MapFS{
		"hooks.json": file(`{"hooks": [
			{"name": "house-rules", "at": "before_planning", "file": "rules.md"},
			{"at": "after_tool_results", "role": "user", "text": "Say which tools you used."},
			{"at": "before_final_answer", "role": "system", "persistent": true, "file": "style/answer.md"},
			{"at": "after_planning", "file": "alias.md"}
		]}`),
		"rules.md":        file("\n# House rules\n\nBe brief.\n\n"),
		"style/answer.md": file("Answer in the user's language."),
		"alias.md":        link("style/answer.md"),
	}
	hs, err := hooks.Load(fsys)
	require.NoError(t, err)
	assert.Equal(t, []agent.Hook{
		hooks.Entry{Name: "house-rules", At: agent.BeforePlanning, File: "rules.md",
			Injection: agent.Injection{Role: memory.RoleSystem, Content: "# House rules\n\nBe brief."}},
		hooks.Entry{At: agent.AfterToolResults,
			Injection: agent.Injection{Role: memory.RoleUser, Content: "Say which tools you used."}},
		hooks.Entry{At: agent.BeforeFinalAnswer, File: "style/answer.md",
			Injection: agent.Injection{Role: memory.RoleSystem, Content: "Answer in the user's language.", Persistent: true}},
		hooks.Entry{At: agent.AfterPlanning, File: "alias.md",
			Injection: agent.Injection{Role: memory.RoleSystem, Content: "Answer in the user's language."}},
	}, hs)

	// An entry injects at its checkpoint only.
	ctx := context.Background()
	for _, at := range []agent.Checkpoint{agent.BeforePlanning, agent.AfterPlanning, agent.BeforeToolRound, agent.AfterToolResults, agent.BeforeFinalAnswer} {
		injs, err := hs[0].Inject(ctx, at, agent.HookState{})
		require.NoError(t, err)
		if at == agent.BeforePlanning {
			assert.Equal(t, []agent.Injection{{Role: memory.RoleSystem, Content: "# House rules\n\nBe brief."}}, injs)
		} else {
			assert.Empty(t, injs, at)
		}
	}

	// An empty list is no hooks.
	hs, err = hooks.Load(fstest.MapFS{"hooks.json": file(`{"hooks": []}`)})
	require.NoError(t, err)
	assert.Empty(t, hs)
}

func TestLoadErrors(t *testing.T) {
	big := strings.Repeat("x", hooks.MaxBody+1)
	tests := []struct {
		name  string
		fsys  fstest.MapFS
		want  string
		isErr error
	}{
		{name: "no hooks.json", fsys: fstest.MapFS{"rules.md": file("x")}, want: "hooks: hooks.json not found (a folder of hooks lists them in hooks.json): lstat hooks.json: file does not exist", isErr: fs.ErrNotExist},
		{name: "hooks.json is a folder", fsys: fstest.MapFS{"hooks.json/x": file("x")}, want: "hooks: hooks.json: not a regular file (d---------)"},
		{name: "invalid JSON", fsys: index(`{"hooks": [`), want: "hooks: hooks.json: unexpected EOF"},
		{name: "trailing data", fsys: index(`{"hooks": []} []`), want: "hooks: hooks.json: invalid JSON: more after the first value"},
		{name: "no list", fsys: index(`{}`), want: `hooks: hooks.json: no "hooks" list`},
		{name: "unknown top-level key", fsys: index(`{"hook": []}`), want: `hooks: hooks.json: json: unknown field "hook"`},
		{name: "unknown key", fsys: index(`{"hooks": [{"at": "before_planning", "text": "x", "persistant": true}]}`),
			want: `hooks: hooks.json: entry 1: json: unknown field "persistant"`},
		{name: "not an object", fsys: index(`{"hooks": ["before_planning"]}`),
			want: `hooks: hooks.json: entry 1: json: cannot unmarshal string into Go value of type hooks.entry`},
		{name: "unknown checkpoint", fsys: index(`{"hooks": [{"name": "a", "at": "before_plan", "text": "x"}]}`),
			want: `hooks: hooks.json: entry 1 ("a"): unknown checkpoint "at": "before_plan" (want one of before_planning, after_planning, before_tool_round, after_tool_results, before_final_answer)`},
		{name: "no checkpoint", fsys: index(`{"hooks": [{"text": "x"}]}`),
			want: `hooks: hooks.json: entry 1: unknown checkpoint "at": "" (want one of before_planning, after_planning, before_tool_round, after_tool_results, before_final_answer)`},
		{name: "unknown role", fsys: index(`{"hooks": [{"at": "before_planning", "text": "x"}, {"at": "before_planning", "role": "assistant", "text": "x"}]}`),
			want: `hooks: hooks.json: entry 2: unknown "role": "assistant" (want "system" or "user")`},
		{name: "file and text", fsys: index(`{"hooks": [{"at": "before_planning", "text": "x", "file": "a.md"}]}`),
			want: `hooks: hooks.json: entry 1: both "file" and "text": give one`},
		{name: "neither file nor text", fsys: index(`{"hooks": [{"at": "before_planning"}]}`),
			want: `hooks: hooks.json: entry 1: no "file" or "text": give one`},
		{name: "empty text", fsys: index(`{"hooks": [{"at": "before_planning", "text": " \n"}]}`),
			want: `hooks: hooks.json: entry 1: the text is empty`},
		{name: "missing file", fsys: index(`{"hooks": [{"name": "rules", "at": "before_planning", "file": "rules.md"}]}`),
			want: `hooks: hooks.json: entry 1 ("rules"): file "rules.md": lstat rules.md: file does not exist`, isErr: fs.ErrNotExist},
		{name: "empty file", fsys: with(index(`{"hooks": [{"at": "before_planning", "file": "a.md"}]}`), "a.md", file("\n\n")),
			want: `hooks: hooks.json: entry 1: the text is empty`},
		{name: "file too large", fsys: with(index(`{"hooks": [{"at": "before_planning", "file": "a.md"}]}`), "a.md", file(big)),
			want: `hooks: hooks.json: entry 1: file "a.md": 65537 bytes, more than the limit of 65536`},
		{name: "not UTF-8", fsys: with(index(`{"hooks": [{"at": "before_planning", "file": "a.md"}]}`), "a.md", file("\xff\xfe")),
			want: `hooks: hooks.json: entry 1: the text is not UTF-8`},
		{name: "a folder", fsys: with(index(`{"hooks": [{"at": "before_planning", "file": "dir"}]}`), "dir/a.md", file("x")),
			want: `hooks: hooks.json: entry 1: file "dir": not a regular file (d---------)`},
		{name: "parent", fsys: index(`{"hooks": [{"at": "before_planning", "file": "../secret.md"}]}`),
			want: `hooks: hooks.json: entry 1: file "../secret.md": not a path inside the folder (elements separated by "/", no "..", no leading "/", no backslash)`},
		{name: "parent inside", fsys: index(`{"hooks": [{"at": "before_planning", "file": "a/../../secret.md"}]}`),
			want: `hooks: hooks.json: entry 1: file "a/../../secret.md": not a path inside the folder (elements separated by "/", no "..", no leading "/", no backslash)`},
		{name: "absolute", fsys: index(`{"hooks": [{"at": "before_planning", "file": "/etc/passwd"}]}`),
			want: `hooks: hooks.json: entry 1: file "/etc/passwd": not a path inside the folder (elements separated by "/", no "..", no leading "/", no backslash)`},
		{name: "backslash", fsys: index(`{"hooks": [{"at": "before_planning", "file": "..\\secret.md"}]}`),
			want: `hooks: hooks.json: entry 1: file "..\\secret.md": not a path inside the folder (elements separated by "/", no "..", no leading "/", no backslash)`},
		{name: "symlink out", fsys: with(index(`{"hooks": [{"at": "before_planning", "file": "a.md"}]}`), "a.md", link("../secret.md")),
			want: `hooks: hooks.json: entry 1: file "a.md": a.md is a symbolic link to "../secret.md", outside the folder`},
		{name: "symlink out from a folder", fsys: with(index(`{"hooks": [{"at": "before_planning", "file": "sub/a.md"}]}`), "sub", link("../../etc")),
			want: `hooks: hooks.json: entry 1: file "sub/a.md": sub is a symbolic link to "../../etc", outside the folder`},
		{name: "symlink absolute", fsys: with(index(`{"hooks": [{"at": "before_planning", "file": "a.md"}]}`), "a.md", link("/etc/passwd")),
			want: `hooks: hooks.json: entry 1: file "a.md": a.md is a symbolic link to "/etc/passwd", outside the folder`},
		{name: "symlink loop", fsys: with(with(index(`{"hooks": [{"at": "before_planning", "file": "a.md"}]}`), "a.md", link("b.md")), "b.md", link("a.md")),
			want: `hooks: hooks.json: entry 1: file "a.md": more than 32 symbolic links`},
		{name: "hooks.json a link out", fsys: fstest.MapFS{"hooks.json": link("../other/hooks.json")},
			want: `hooks: hooks.json: hooks.json is a symbolic link to "../other/hooks.json", outside the folder`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs, err := hooks.Load(tt.fsys)
			assert.Nil(t, hs)
			require.EqualError(t, err, tt.want)
			if tt.isErr != nil {
				assert.ErrorIs(t, err, tt.isErr)
			}
		})
	}
}

func index(s string) fstest.MapFS { return fstest.MapFS{"hooks.json": file(s)} }

func with(fsys fstest.MapFS, name string, f *fstest.MapFile) fstest.MapFS {
	fsys[name] = f
	return fsys
}

// LoadDir reads a real folder: links inside it are followed, links out of
// it are refused.
func TestLoadDir(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.md")
	require.NoError(t, os.WriteFile(secret, []byte("the secret"), 0o600))
	dir := t.TempDir()
	write := func(name, s string) {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600))
	}
	symlink := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			if os.Getenv("PLANROUND_REQUIRE_ALL") == "1" {
				t.Fatalf("symbolic links: %v", err)
			}
			t.Skipf("symbolic links not available: %v", err)
		}
	}
	write("hooks.json", `{"hooks": [{"at": "before_planning", "file": "prompts/rules.md"}, {"at": "after_planning", "file": "inside.md"}]}`)
	write("prompts/rules.md", "Be brief.\n")
	symlink("prompts/rules.md", "inside.md")
	hs, err := hooks.LoadDir(dir)
	require.NoError(t, err)
	require.Len(t, hs, 2)
	assert.Equal(t, "Be brief.", hs[1].(hooks.Entry).Injection.Content)

	for _, target := range []string{secret, filepath.Join("..", filepath.Base(outside), "secret.md")} {
		require.NoError(t, os.Remove(filepath.Join(dir, "inside.md")))
		symlink(target, "inside.md")
		hs, err = hooks.LoadDir(dir)
		assert.Nil(t, hs)
		require.Error(t, err, target)
		assert.Contains(t, err.Error(), filepath.Join(dir, "hooks.json")+`: entry 2: file "inside.md": inside.md is a symbolic link to`)
		assert.Contains(t, err.Error(), "outside the folder")
	}

	_, err = hooks.LoadDir(outside)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorContains(t, err, filepath.Join(outside, "hooks.json"))
	_, err = hooks.LoadDir(filepath.Join(outside, "missing"))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// FuzzLoad: whatever hooks.json holds, Load returns hooks or an error, and
// never a hook with an unknown checkpoint, a bad role or an empty text.
func FuzzLoad(f *testing.F) {
	f.Add(`{"hooks": [{"name": "r", "at": "before_planning", "file": "rules.md"}]}`)
	f.Add(`{"hooks": [{"at": "after_tool_results", "role": "user", "persistent": true, "text": "x"}]}`)
	f.Add(`{"hooks": [{"at": "before_final_answer", "file": "../x"}]}`)
	f.Add(`{"hooks": [{"at": "before_final_answer", "file": "link.md"}]}`)
	f.Add(`{"hooks": null}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, index string) {
		fsys := fstest.MapFS{
			"hooks.json": file(index),
			"rules.md":   file("Be brief."),
			"link.md":    link("../rules.md"),
		}
		hs, err := hooks.Load(fsys)
		if err != nil {
			if hs != nil {
				t.Fatalf("hooks and an error: %v", err)
			}
			return
		}
		for _, h := range hs {
			e := h.(hooks.Entry)
			if strings.TrimSpace(e.Injection.Content) == "" {
				t.Fatalf("empty injection: %+v", e)
			}
			if e.Injection.Role != memory.RoleSystem && e.Injection.Role != memory.RoleUser {
				t.Fatalf("role %q", e.Injection.Role)
			}
			injs, err := e.Inject(context.Background(), e.At, agent.HookState{})
			if err != nil || len(injs) != 1 {
				t.Fatalf("Inject at its checkpoint: %v, %v", injs, err)
			}
		}
	})
}
