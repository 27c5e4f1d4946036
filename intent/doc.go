// Package intent holds the intent tags of the planning round, the default
// planning and continuation prompts, and the clean-up of tags from the
// message history.
//
// # The planning round
//
// Round 0 of a run sends the conversation without tools, followed by a
// temporary system message, the planning prompt ([PlanningPrompt] or
// [Dictionary.PlanningPrompt]). It asks the model to answer the user in
// words first and to end its reply with exactly one intent tag:
// "<no_tool>" when it answered without tools, "<need_tool>" when it needs
// them. When the reply is complete the agent calls [Dictionary.Detect] on
// the whole text. A tag with [Tag.SkipTools] leads to a continuation round
// without tools under [ContinuationPrompt]; any other tag, or no tag, leads
// to the tool loop.
//
// Either way the agent then appends the reply and a [ContinueMessage] user
// message to its working list (no [ContinueMessage] when the reply was
// only a tag) and removes the tags from the text of every assistant message
// in it with [Dictionary.Strip], so that later rounds do not imitate the
// tags; the text of later rounds goes into the list stripped too. The
// stream parser hides the tags from the text users see, by the same rule as
// [Dictionary.Strip]; [Dictionary.Tags] lists them for it.
//
// The package imports only the standard library.
//
// # Dictionaries
//
// Tags come from a [Dictionary]. [DefaultDictionary] holds "<no_tool>" and
// "<need_tool>"; [NewDictionary] builds others, each tag with the intent a
// host sees, whether it skips tools, and a description for the prompt. The
// zero Dictionary is the default one.
//
// # Prompts
//
// The default prompts are written in English (one text to maintain and
// test), and each tells the model to reply in the language the user
// writes in, so they serve users of any language. They name no tool and
// describe none. A host that replaces them (the agent's configuration
// allows it) should keep both properties, and a planning prompt of its own
// must still ask for exactly one tag of the dictionary at the end.
package intent
