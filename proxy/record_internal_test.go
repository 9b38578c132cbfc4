package proxy

import (
	"bytes"
	"testing"
)

// TestArena: an arena gives back what was written to it, in writes of
// every size around its block boundaries, and is empty after release.
func TestArena(t *testing.T) {
	sizes := []int{0, 1, 90, minBlock - 91, 1, 2 * minBlock, readSize, maxBlock - 1, 2, 3*maxBlock + 5, 7}
	var a arena
	var want []byte
	for i, n := range sizes {
		p := bytes.Repeat([]byte{byte('a' + i)}, n)
		a.write(p)
		want = append(want, p...)
		if a.n != len(want) {
			t.Fatalf("after %d writes, n = %d, want %d", i+1, a.n, len(want))
		}
	}
	got := a.bytes()
	if !bytes.Equal(got, want) {
		t.Fatalf("bytes() differs from what was written: got %d bytes, want %d", len(got), len(want))
	}
	// Blocks of 4, 8, 16, 32 KiB, then of 64 KiB.
	wantBlocks, size := 0, 0
	for size < len(want) {
		size += minBlock << min(wantBlocks, blockLevels-1)
		wantBlocks++
	}
	if len(a.blocks) != wantBlocks {
		t.Errorf("%d blocks for %d bytes, want %d", len(a.blocks), len(want), wantBlocks)
	}
	for i, b := range a.blocks {
		if got, want := len(*b), minBlock<<min(i, blockLevels-1); got != want {
			t.Errorf("block %d has %d bytes, want %d", i, got, want)
		}
	}
	a.release()
	if a.n != 0 || a.blocks != nil || a.bytes() != nil {
		t.Errorf("after release: n %d, %d blocks, bytes %q; want an empty arena", a.n, len(a.blocks), a.bytes())
	}
	// bytes is the caller's: a block reused by another arena leaves it be.
	var b arena
	b.write(bytes.Repeat([]byte{'z'}, 2*maxBlock))
	if !bytes.Equal(got, want) {
		t.Errorf("a later arena's writes changed what bytes() returned")
	}
	b.release()
}
