package main

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
)

// A shard is one part of a stable partition of recordings by name, for a
// CI matrix of N jobs that together replay everything exactly once.
type shard struct {
	index, count int // 1 ≤ index ≤ count
}

// parseShard reads --shard I/N.
func parseShard(s string) (shard, error) {
	i, n, ok := strings.Cut(s, "/")
	index, err1 := strconv.Atoi(i)
	count, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || count < 1 || index < 1 || index > count {
		return shard{}, usageErrorf("--shard %q: want I/N with 1 ≤ I ≤ N, e.g. --shard 2/4 for the second of four CI jobs", s)
	}
	return shard{index: index, count: count}, nil
}

func (s shard) String() string { return fmt.Sprintf("%d/%d", s.index, s.count) }

// has reports whether the recording named name is in the shard. The shard
// of a name is a hash of the name alone, so that a recording stays in its
// shard whatever other recordings are added or removed.
func (s shard) has(name string) bool {
	if s.count <= 1 {
		return true
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	return int(h.Sum64()%uint64(s.count))+1 == s.index
}

// A selection picks the recordings a command runs on out of the names
// given or listed: those --run matches, in --shard's part.
type selection struct {
	run   *regexp.Regexp // nil for every name
	shard shard          // count 0 for every name
}

// parseSelection reads --run and --shard.
func parseSelection(run, shardFlag string) (selection, error) {
	var sel selection
	if run != "" {
		re, err := regexp.Compile(run)
		if err != nil {
			return selection{}, usageErrorf("--run %q: %v; pass a Go regular expression matched against recording names", run, err)
		}
		sel.run = re
	}
	if shardFlag != "" {
		s, err := parseShard(shardFlag)
		if err != nil {
			return selection{}, err
		}
		sel.shard = s
	}
	return sel, nil
}

// any reports whether the selection narrows anything.
func (sel selection) any() bool { return sel.run != nil || sel.shard.count > 0 }

// pick returns the names the selection keeps, in their order, and how
// many --run matched before sharding. A --run
// that matches none of names is an error (a typo would otherwise pass
// CI with nothing replayed); an empty shard is not, since a matrix may
// have more jobs than recordings.
func (sel selection) pick(names []string) (picked []string, matched int, err error) {
	var matches []string
	for _, n := range names {
		if sel.run == nil || sel.run.MatchString(n) {
			matches = append(matches, n)
		}
	}
	if len(matches) == 0 && len(names) > 0 {
		return nil, 0, usageErrorf("--run %q matches none of the %d recordings; list them with acptap show", sel.run.String(), len(names))
	}
	for _, n := range matches {
		if sel.shard.has(n) {
			picked = append(picked, n)
		}
	}
	return picked, len(matches), nil
}
