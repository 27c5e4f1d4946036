// Package cdp drives a headless Chromium for tests, over the Chrome
// DevTools Protocol.
//
// [Start] runs Chromium with --remote-debugging-pipe: Chromium reads
// commands from its fd 3 and writes answers and events to its fd 4, each a
// JSON message ended by a NUL byte. The pipe is the debugging channel: no
// port, so no other process on 127.0.0.1 can drive the browser. The package
// needs nothing beyond the standard library and a Chromium binary.
//
// # Failing and skipping
//
// A method that sends the browser a command fails the test the browser was
// started for (t.Fatal) when the browser does not answer in 30 s or reports
// an error; only [Page.Eval] returns the error instead (and [Browser.Close]
// ignores it). A test that cannot find Chromium is skipped with a message
// saying so, or fails under PLANROUND_REQUIRE_ALL=1, as CI runs them: see
// [ChromiumPath].
//
// # Pages
//
// [Browser.NewPage] opens a tab; a [Page] evaluates JavaScript ([Page.Eval],
// [Page.JS], [Page.Str], [Page.Int], [Page.WaitFor]) and acts as a user would,
// with real input events ([Page.TypeText], [Page.Click], [Page.SetFiles]).
// The JavaScript exceptions and console errors of every page are kept, for
// a test to assert there were none ([Browser.PageErrors]), and so are the
// errors the browser logs itself: failed requests, error statuses,
// Content-Security-Policy violations ([Browser.LogErrors]; both:
// [Browser.Errors]).
package cdp
