package skills

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"unicode/utf8"

	"github.com/planround/planround/agent"
	"github.com/planround/planround/internal/filecheck"
)

// ToolName is the name of the tool Set.Tool returns.
const ToolName = "get_skill"

type getSkillArgs struct {
	Name string `json:"name" jsonschema:"the skill's name, as the skills list gives it"`
	File string `json:"file,omitempty" jsonschema:"a file of the skill, as a path inside its folder such as reference.md; leave it out for the skill's instructions"`
}

// Tool returns the get_skill tool, which gives the model the full text of
// an enabled skill, or one of its files. Its arguments are
// {"name": "...", "file": "..."}; file is optional.
//
// Without file (or with file "SKILL.md"), the result is the skill's
// instructions, Skill.Body (the description when the body is empty),
// followed by a line listing Skill.Files. With file, it is that file's
// text, read from the file system given to Load at the time of the call.
//
// The call fails, and the model reads why, for a skill that does not exist
// or is not enabled for the run (see Set.Enabled), and for a file that is
// not a relative path inside the skill's folder with '/' separators (an
// absolute path, a drive letter, a backslash, a ".." element; a leading
// "./" is allowed), that is hidden (a name starting with a dot, such as
// .env, anywhere in the path), that leaves
// the folder through a symbolic link, does not exist, is a folder or not a
// regular file, has more than one hard link (unless WithHardLinks), is
// larger than MaxFileSize, or is not UTF-8 text; and for any file of a
// skill whose folder is no longer the one it was loaded from (see "Links
// and changes" in the package doc).
//
// Its definition says SkipApproval, since it only reads the host's own
// skill documents and changes nothing, and NoTruncate, so that the text it
// returned stays whole in the requests of later turns.
func (s *Set) Tool() agent.Tool {
	return agent.NewTool(ToolName,
		"Returns the full instructions of one of your skills, or one of its files. Call it before a task that a skill's description fits.",
		s.getSkill, agent.WithSkipApproval(), agent.WithNoTruncate())
}

func (s *Set) getSkill(ctx context.Context, args getSkillArgs, _ agent.Progress) (string, error) {
	call, _ := agent.CallFromContext(ctx)
	sk, known, on := s.enabled(ctx, call.SessionID, args.Name)
	switch {
	case !known:
		return "", fmt.Errorf("there is no skill %q; %s", args.Name, s.enabledList(ctx, call.SessionID))
	case !on:
		return "", fmt.Errorf("the skill %q is not enabled in this conversation; %s", args.Name, s.enabledList(ctx, call.SessionID))
	}
	file := args.File
	for strings.HasPrefix(file, "./") {
		file = file[2:]
	}
	if file == "" || file == FileName {
		return instructions(sk), nil
	}
	if err := checkPath(file); err != nil {
		return "", err
	}
	data, err := s.readSkillFile(sk, file)
	if err != nil {
		return "", err
	}
	if !utf8.Valid(data) {
		return "", fmt.Errorf("file %q of the skill %q is not UTF-8 text", file, sk.Name)
	}
	return string(data), nil
}

// readSkillFile reads a file of sk, with errors the model can act on.
func (s *Set) readSkillFile(sk Skill, name string) ([]byte, error) {
	t, err := s.open()
	if err != nil {
		return nil, fmt.Errorf("cannot open the skills folder: %w", err)
	}
	defer t.close()
	f, err := t.folder(sk.Dir)
	if err != nil {
		return nil, fmt.Errorf("cannot open the folder of the skill %q: %w", sk.Name, err)
	}
	defer f.close()
	// The folder must be the one Load read: one swapped for another (a link
	// to another skill's folder, a copy) holds other files than the
	// skill's.
	info, err := f.stat()
	if err != nil {
		return nil, fmt.Errorf("cannot open the folder of the skill %q: %w", sk.Name, err)
	}
	if same, known := filecheck.Same(s.folders[sk.Name], info); known && !same {
		return nil, fmt.Errorf("the folder of the skill %q is no longer the one its skills were loaded from (it was moved or replaced), so its files cannot be read until the host loads the skills again", sk.Name)
	}
	data, err := readFile(f, name, s.hardLinks)
	switch {
	case err == nil:
		return data, nil
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("the skill %q has no file %q; %s", sk.Name, name, fileList(sk))
	case errors.Is(err, errIsDir):
		return nil, fmt.Errorf("%q is a folder of the skill %q; %s", name, sk.Name, fileList(sk))
	case errors.Is(err, errOutside), errors.Is(err, errTooLarge):
		return nil, err
	}
	return nil, fmt.Errorf("cannot read file %q of the skill %q: %w", name, sk.Name, err)
}

// instructions is get_skill's result without a file.
func instructions(sk Skill) string {
	text := sk.Body
	if text == "" {
		text = sk.Description
	}
	if len(sk.Files) > 0 {
		text += "\n\nFiles of this skill (" + ToolName + ` with "file" returns one): ` + strings.Join(sk.Files, ", ")
	}
	return text
}

// enabledList names the skills enabled for a run, for error messages.
func (s *Set) enabledList(ctx context.Context, sessionID string) string {
	on := s.Enabled(ctx, sessionID)
	if len(on) == 0 {
		return "no skill is enabled"
	}
	names := make([]string, len(on))
	for i, sk := range on {
		names[i] = sk.Name
	}
	return "the enabled skills are: " + strings.Join(names, ", ")
}

// fileList names the files of sk, for error messages.
func fileList(sk Skill) string {
	if len(sk.Files) == 0 {
		return "it has no files besides its instructions"
	}
	return "its files are: " + strings.Join(sk.Files, ", ")
}
