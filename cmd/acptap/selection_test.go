package main

import (
	"fmt"
	"slices"
	"testing"
)

func TestShardPartition(t *testing.T) {
	var names []string
	for i := range 200 {
		names = append(names, fmt.Sprintf("session-%03d", i))
	}
	for _, n := range []int{1, 2, 3, 7} {
		// Every name is in exactly one of the n shards, and no shard is
		// empty or holds more than twice its share.
		seen := map[string]int{}
		for i := 1; i <= n; i++ {
			sel := selection{shard: shard{index: i, count: n}}
			got, _, err := sel.pick(names)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 || len(got) > 2*len(names)/n {
				t.Errorf("shard %d/%d holds %d of %d names, want about %d", i, n, len(got), len(names), len(names)/n)
			}
			for _, name := range got {
				seen[name]++
			}
		}
		for _, name := range names {
			if seen[name] != 1 {
				t.Errorf("%s is in %d of the %d shards, want 1", name, seen[name], n)
			}
		}
	}
}

func TestShardStable(t *testing.T) {
	names := []string{"fix-typo", "add-test", "refactor", "explain", "rename"}
	shardOf := func(names []string, n int) map[string]int {
		m := map[string]int{}
		for i := 1; i <= n; i++ {
			got, _, _ := selection{shard: shard{index: i, count: n}}.pick(names)
			for _, name := range got {
				m[name] = i
			}
		}
		return m
	}
	before := shardOf(names, 3)
	after := shardOf(append(slices.Clone(names), "new-session"), 3)
	for _, name := range names {
		if before[name] != after[name] {
			t.Errorf("adding a recording moved %s from shard %d to %d", name, before[name], after[name])
		}
	}
}

func TestParseShard(t *testing.T) {
	for _, ok := range []string{"1/1", "1/3", "3/3", "10/12"} {
		if _, err := parseShard(ok); err != nil {
			t.Errorf("parseShard(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "0/3", "4/3", "1/0", "-1/2", "x/2", "1/x", "1", "1/2/3", " 1/2"} {
		if _, err := parseShard(bad); err == nil {
			t.Errorf("parseShard(%q) = nil error, want one", bad)
		}
	}
}

func TestSelectionRun(t *testing.T) {
	sel, err := parseSelection("^fix-", "")
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := sel.pick([]string{"fix-typo", "add-test", "fix-tests"})
	if want := []string{"fix-typo", "fix-tests"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("pick = %q, %v; want %q", got, err, want)
	}
	if _, _, err := sel.pick([]string{"add-test"}); err == nil {
		t.Errorf("a --run that matches nothing: no error")
	}
}
