package notehub

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/planround/planround/internal/leaktest"
)

// TestOverflow: a listener that does not keep up loses its queued notes
// for one empty payload, then hears the notes that follow.
func TestOverflow(t *testing.T) {
	leaktest.Check(t)
	var h Hub
	entered, release := make(chan struct{}), make(chan struct{})
	got := make(chan string, MaxQueue+10)
	stop, err := h.Add("k", func(p string) {
		if p == "first" {
			close(entered)
			<-release
		}
		got <- p
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	h.Deliver("k", "first")
	<-entered
	for i := range MaxQueue + 4 {
		h.Deliver("k", fmt.Sprint(i))
	}
	h.Deliver("other", "not for k")
	close(release)
	want := []string{"first", "", fmt.Sprint(MaxQueue + 1), fmt.Sprint(MaxQueue + 2), fmt.Sprint(MaxQueue + 3)}
	var heard []string
	for range want {
		select {
		case p := <-got:
			heard = append(heard, p)
		case <-time.After(10 * time.Second):
			t.Fatalf("heard %q, want %q", heard, want)
		}
	}
	if !slices.Equal(heard, want) {
		t.Errorf("heard %q, want %q", heard, want)
	}
}

// TestClose: Close stops every listener and refuses new ones; a stop
// after Close does nothing.
func TestClose(t *testing.T) {
	leaktest.Check(t)
	var h Hub
	var stops []func()
	for _, k := range []string{"a", "a", "b"} {
		stop, err := h.Add(k, func(string) {})
		if err != nil {
			t.Fatal(err)
		}
		stops = append(stops, stop)
	}
	if got := slices.Sorted(slices.Values(h.Keys())); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Keys = %v, want [a b]", got)
	}
	h.Close()
	if len(h.Keys()) != 0 || h.Has("a") {
		t.Errorf("Keys after Close = %v, want none", h.Keys())
	}
	if _, err := h.Add("a", func(string) {}); err != ErrClosed {
		t.Errorf("Add after Close: err = %v, want ErrClosed", err)
	}
	for _, stop := range stops {
		stop()
	}
	if err := h.Deliver("a", "x"); err != ErrClosed {
		t.Errorf("Deliver after Close: err = %v, want ErrClosed", err)
	}
	h.DeliverAll("")
}
