// Package skills gives an agent skills: folders of instructions, in the open
// skill format, that the model reads when a task needs them.
//
// A skill is a folder holding a SKILL.md: YAML front matter with the
// skill's name and description (and any other keys, kept in Skill.Meta),
// then its instructions in Markdown. The folder may hold other files
// (references, templates, scripts) that the model reads on request.
//
//	pdf/
//	  SKILL.md        ---
//	                  name: pdf
//	                  description: Extract text and tables from PDF files.
//	                  ---
//	                  # Working with PDFs ...
//	  reference.md
//
// [Load] (any fs.FS) and [LoadDir] (a folder on disk) find the skills; a
// skill whose SKILL.md is malformed is skipped, with the reason logged and
// kept in [Set.Skipped], and the others load.
//
// # Wiring a Set into an agent
//
// The description of each enabled skill goes to the model in one system
// block right after the system prompt ([Set.Layer], for agent.Config.Layers);
// the full text comes through the get_skill tool ([Set.Tool], for
// agent.Config.Tools) only when the model asks for it, and stays whole in
// later requests (the tool's definition says NoTruncate). get_skill reads
// only the host's own skill documents, so it needs no approval.
//
// # Enabled skills
//
// Which skills are enabled is decided per run: from the run's context
// ([WithEnabled]), else per session by the host's selector ([WithSelector]),
// else every skill is enabled. The layer and get_skill agree on it: a skill
// that is not enabled is neither listed nor returned.
package skills
