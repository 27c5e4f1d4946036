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
// # Links and changes
//
// A skill is read from its own folder and nothing else. A symbolic link in
// it is followed only to another file of the same folder, never to a
// hidden file; a file with more than one hard link is refused (a skipped
// skill for a SKILL.md; for another file, left out of Skill.Files with a
// warning, and refused by get_skill), since a hard link is the file
// itself under a second name, and nothing in the folder tells a file of
// its own from a file elsewhere linked into it. Git checkouts and copies
// hold no hard links; package managers that install from a store may
// (pnpm, a Nix store): [WithHardLinks] reads them. The link count comes
// from the operating system on Unix; elsewhere (Windows) it is not
// checked, and a hard link to a file outside the folder is read like any
// other file: only paths are checked there, and they show no hard link.
//
// [LoadDir] reads the skills through handles of the operating system
// ([os.Root]): a skill's folder is opened from the skills folder's handle,
// and its files from the folder's, so links that leave the folder are
// refused by the system too, at the moment of the read, whatever they
// were when checked; and the checks that decide what is read (a regular
// file, its size, its links) are made on the open file, which must be the
// file whose path was checked. Skills are resolved at the time of the
// call, with nothing held open in between: get_skill opens the skill's
// folder again, and on Unix reads its files only when it is the folder the
// skill was loaded from (the same device and inode number). A folder moved,
// replaced by another or by a link to another skill's folder since Load is
// then an error, never another skill's text (elsewhere the folder is found
// by its path, still inside the skills folder). Files changed inside the
// folder are read as they are now, while the instructions, read by Load,
// stay as they were until the skills are loaded again.
//
// [Load] over another fs.FS can check only paths (and, where the file
// system gives inode numbers, that the file opened is the one checked): a
// link or folder swapped while a call reads can still lead it to another
// file. Use LoadDir for a folder that others can change.
//
// # Enabled skills
//
// Which skills are enabled is decided per run: from the run's context
// ([WithEnabled]), else per session by the host's selector ([WithSelector]),
// else every skill is enabled. The layer and get_skill agree on it: a skill
// that is not enabled is neither listed nor returned.
package skills
