package skills_test

import (
	"context"
	"testing"

	"github.com/planround/planround/agent/skills"
)

// BenchmarkGetSkillFile is one get_skill call that reads a file of a skill
// loaded with LoadDir: the skills folder and the skill's folder opened,
// the file checked and read.
func BenchmarkGetSkillFile(b *testing.B) {
	dir := b.TempDir()
	write(b, dir, "pdf/SKILL.md", "---\nname: pdf\ndescription: Read PDFs.\n---\nUse pdftotext.")
	write(b, dir, "pdf/docs/reference.md", "the reference")
	s, err := skills.LoadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for b.Loop() {
		got, err := getSkill(ctx, s, "pdf", "docs/reference.md")
		if err != nil || got != "the reference" {
			b.Fatalf("%q, %v", got, err)
		}
	}
}
