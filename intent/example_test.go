package intent_test

import (
	"fmt"

	"github.com/planround/planround/intent"
)

func ExampleDictionary_Detect() {
	d := intent.DefaultDictionary()

	r := d.Detect("It's sunny in Paris today, so no umbrella needed. <no_tool>")
	fmt.Println(r.Intent, r.SkipTools)

	// The last tag wins.
	r = d.Detect("<no_tool> Actually, let me check the live forecast. <need_tool>")
	fmt.Println(r.Intent, r.SkipTools)

	// No tag: treated as needing tools.
	r = d.Detect("Let me check.")
	fmt.Println(r.Found, r.SkipTools)
	// Output:
	// no_tool true
	// need_tool false
	// false false
}

func ExampleDictionary_Strip() {
	d := intent.DefaultDictionary()
	fmt.Printf("%q\n", d.Strip("I'll look up the forecast for you.\n<need_tool>"))
	fmt.Printf("%q\n", d.Strip("<voice>Sure! <no_tool>"))
	fmt.Printf("%q\n", d.Strip("First <no_tool> then <need_tool> more."))
	// Output:
	// "I'll look up the forecast for you."
	// "<voice>Sure!"
	// "First then more."
}

func ExampleNewDictionary() {
	d, err := intent.NewDictionary(
		intent.Tag{Name: "<chat>", SkipTools: true, Description: "small talk you answered fully"},
		intent.Tag{Name: "<search>", Intent: "web_search", Description: "you must search the web"},
		intent.Tag{Name: "<act>", Description: "you must change something for the user"},
	)
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Tags())
	fmt.Printf("%+v\n", d.Detect("I'll search for that. <search>"))

	_, err = intent.NewDictionary(intent.Tag{Name: "search"})
	fmt.Println(err)
	// Output:
	// [<chat> <search> <act>]
	// {Tag:<search> Intent:web_search SkipTools:false Found:true}
	// intent: invalid dictionary: tag "search": must be '<', a name, '>'
}
