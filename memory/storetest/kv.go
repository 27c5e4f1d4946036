package storetest

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/planround/planround/memory"
)

// RunKV tests an implementation of [memory.KV]: values round-trip byte for
// byte in their namespaces, a missing key is [memory.ErrNotFound], SwapValue
// lets exactly one of several concurrent writers win, and input outside
// the bounds is refused without touching the store. newKV returns an
// empty store; the suite runs in bounded time.
func RunKV(t *testing.T, newKV func(t *testing.T) memory.KV) {
	t.Helper()
	ctx := context.Background()
	t.Run("RoundTrip", func(t *testing.T) {
		kv := newKV(t)
		if _, err := kv.GetValue(ctx, "ns", "k"); !errors.Is(err, memory.ErrNotFound) {
			t.Fatalf("GetValue of a missing key: %v, want ErrNotFound", err)
		}
		val := []byte{0, 1, 2, 0xff, 'x'} // any bytes, NUL included
		mustKV(t, kv.PutValue(ctx, "ns", "k", val))
		mustKV(t, kv.PutValue(ctx, "other", "k", []byte("other")))
		mustKV(t, kv.PutValue(ctx, "ns", "ключ/2", []byte{}))
		got, err := kv.GetValue(ctx, "ns", "k")
		if err != nil || !bytes.Equal(got, val) {
			t.Fatalf("GetValue = %q, %v; want %q", got, err, val)
		}
		got[0] = 9 // a copy: the store's value does not change
		if again, _ := kv.GetValue(ctx, "ns", "k"); !bytes.Equal(again, val) {
			t.Fatalf("GetValue after changing a returned value = %q, want %q", again, val)
		}
		if got, err := kv.GetValue(ctx, "other", "k"); err != nil || string(got) != "other" {
			t.Fatalf("the other namespace's value = %q, %v", got, err)
		}
		if got, err := kv.GetValue(ctx, "ns", "ключ/2"); err != nil || len(got) != 0 {
			t.Fatalf("an empty value = %q, %v", got, err)
		}
		mustKV(t, kv.PutValue(ctx, "ns", "k", []byte("new")))
		if got, _ := kv.GetValue(ctx, "ns", "k"); string(got) != "new" {
			t.Fatalf("after PutValue over a value: %q", got)
		}
		mustKV(t, kv.DeleteValue(ctx, "ns", "k"))
		mustKV(t, kv.DeleteValue(ctx, "ns", "k")) // absent: no error
		if _, err := kv.GetValue(ctx, "ns", "k"); !errors.Is(err, memory.ErrNotFound) {
			t.Fatalf("GetValue after DeleteValue: %v, want ErrNotFound", err)
		}
		if got, _ := kv.GetValue(ctx, "other", "k"); string(got) != "other" {
			t.Fatalf("DeleteValue removed another namespace's key: %q", got)
		}
	})
	t.Run("Swap", func(t *testing.T) {
		kv := newKV(t)
		ok, err := kv.SwapValue(ctx, "ns", "k", nil, []byte("v1"))
		if err != nil || !ok {
			t.Fatalf("SwapValue from absent = %v, %v", ok, err)
		}
		if ok, err := kv.SwapValue(ctx, "ns", "k", nil, []byte("v2")); err != nil || ok {
			t.Fatalf("SwapValue from absent over a value = %v, %v; want false", ok, err)
		}
		if ok, err := kv.SwapValue(ctx, "ns", "k", []byte("v0"), []byte("v2")); err != nil || ok {
			t.Fatalf("SwapValue from a wrong old value = %v, %v; want false", ok, err)
		}
		if ok, err := kv.SwapValue(ctx, "ns", "absent", []byte("v0"), []byte("v2")); err != nil || ok {
			t.Fatalf("SwapValue of an absent key from a value = %v, %v; want false", ok, err)
		}
		if ok, err := kv.SwapValue(ctx, "ns", "k", []byte("v1"), []byte("v2")); err != nil || !ok {
			t.Fatalf("SwapValue from the old value = %v, %v", ok, err)
		}
		if got, _ := kv.GetValue(ctx, "ns", "k"); string(got) != "v2" {
			t.Fatalf("after the swap: %q", got)
		}
		// Eight writers swap from the same old value: one wins.
		var wg sync.WaitGroup
		wins := make(chan string, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := []byte{'w', byte('0' + i)}
				if ok, err := kv.SwapValue(ctx, "ns", "k", []byte("v2"), v); err != nil {
					t.Errorf("concurrent SwapValue: %v", err)
				} else if ok {
					wins <- string(v)
				}
			}()
		}
		wg.Wait()
		close(wins)
		var won []string
		for w := range wins {
			won = append(won, w)
		}
		if len(won) != 1 {
			t.Fatalf("%d concurrent swaps from one old value won (%q), want 1", len(won), won)
		}
		if got, _ := kv.GetValue(ctx, "ns", "k"); string(got) != won[0] {
			t.Fatalf("value %q, but %q won", got, won[0])
		}
	})
	t.Run("Invalid", func(t *testing.T) {
		kv := newKV(t)
		bad := []struct{ ns, key string }{
			{"", "k"}, {"ns", ""}, {strings.Repeat("n", memory.MaxKVNamespace+1), "k"},
			{"ns", strings.Repeat("k", memory.MaxKVKey+1)}, {"ns", "a\x00b"}, {"ns", "\xff"},
		}
		for _, b := range bad {
			if err := kv.PutValue(ctx, b.ns, b.key, []byte("v")); err == nil {
				t.Errorf("PutValue(%.20q, %.20q) succeeded", b.ns, b.key)
			}
			if _, err := kv.GetValue(ctx, b.ns, b.key); err == nil || errors.Is(err, memory.ErrNotFound) {
				t.Errorf("GetValue(%.20q, %.20q) = %v, want a refusal", b.ns, b.key, err)
			}
		}
		if err := kv.PutValue(ctx, "ns", "big", make([]byte, memory.MaxKVValue+1)); err == nil {
			t.Error("PutValue of a value over MaxKVValue succeeded")
		}
		if _, err := kv.GetValue(ctx, "ns", "big"); !errors.Is(err, memory.ErrNotFound) {
			t.Errorf("a refused value was stored: %v", err)
		}
		mustKV(t, kv.PutValue(ctx, "ns", strings.Repeat("k", memory.MaxKVKey), make([]byte, memory.MaxKVValue)))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := kv.PutValue(cctx, "ns", "k", []byte("v")); err == nil {
			t.Error("PutValue with a cancelled context succeeded")
		}
	})
}

// RunKVPair tests two [memory.KV] values that stand for two processes on
// one store (two Stores on one SQLite file, or on one PostgreSQL schema):
// what one writes the other reads, and of swaps from one old value through
// both, exactly one wins. newPair returns two empty views of one store.
func RunKVPair(t *testing.T, newPair func(t *testing.T) (a, b memory.KV)) {
	t.Helper()
	ctx := context.Background()
	a, b := newPair(t)
	mustKV(t, a.PutValue(ctx, "ns", "k", []byte("from a")))
	if got, err := b.GetValue(ctx, "ns", "k"); err != nil || string(got) != "from a" {
		t.Fatalf("the other view reads %q, %v; want %q", got, err, "from a")
	}
	for round := range 4 {
		old, _ := a.GetValue(ctx, "ns", "k")
		var wg sync.WaitGroup
		wins := make(chan string, 8)
		for i := range 8 {
			kv := a
			if i%2 == 1 {
				kv = b
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := []byte{'r', byte('0' + round), 'w', byte('0' + i)}
				if ok, err := kv.SwapValue(ctx, "ns", "k", old, v); err != nil {
					t.Errorf("concurrent SwapValue: %v", err)
				} else if ok {
					wins <- string(v)
				}
			}()
		}
		wg.Wait()
		close(wins)
		var won []string
		for w := range wins {
			won = append(won, w)
		}
		if len(won) != 1 {
			t.Fatalf("round %d: %d swaps from one old value through two views won (%q), want 1", round, len(won), won)
		}
		for _, kv := range []memory.KV{a, b} {
			if got, _ := kv.GetValue(ctx, "ns", "k"); string(got) != won[0] {
				t.Fatalf("round %d: value %q, but %q won", round, got, won[0])
			}
		}
	}
	mustKV(t, b.DeleteValue(ctx, "ns", "k"))
	if _, err := a.GetValue(ctx, "ns", "k"); !errors.Is(err, memory.ErrNotFound) {
		t.Fatalf("after the other view deleted it: %v, want ErrNotFound", err)
	}
}

func mustKV(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
