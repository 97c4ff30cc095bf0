// Package topk finds the heaviest keys of a weighted stream in bounded
// memory, with the Space-Saving algorithm (Metwally, Agrawal and El Abbadi,
// "Efficient Computation of Frequent and Top-k Elements in Data Streams",
// 2005).
//
// A Sketch monitors at most Cap keys. Adding weight to a monitored key adds
// to its count; adding to an unmonitored key when the sketch is full
// replaces the key with the smallest count, which the newcomer inherits as
// its error. The replacement is filtered, after Homem and Carvalho's
// Filtered Space-Saving (2010): a key left out is first counted in a cell
// of a small array chosen by its hash, and replaces the minimum only once
// its cell has outgrown it. On a long tail of light keys most adds then
// cost a hash and an addition instead of a replacement, and the bounds are
// Space-Saving's. The hash is seeded per sketch, so a caller cannot aim its
// keys at one cell; keys that share a cell only make replacements more
// frequent, never a bound wrong. The guarantees, for a stream of total
// weight W:
//
//   - every reported Count over-estimates the key's true weight by at most
//     its Err: Count-Err ≤ true ≤ Count;
//   - Err ≤ Floor ≤ W/Cap, where Floor is the smallest monitored count of
//     a full sketch (0 while it is not full);
//   - every key whose true weight exceeds Floor is monitored, so the true
//     top k are reported whenever the k-th heaviest outweighs Floor.
//
// Memory is Cap entries (each holding a copy of its key) and 8×Cap filter
// cells, whatever the number of distinct keys. Summaries of several
// sketches, each over a disjoint part of one stream (one per node, or per
// shard), merge into one answer with the same kind of bound (see Merge).
//
// The package is a pure core: no clock, no I/O, no goroutines, standard
// library only. A Sketch is not safe for concurrent use; its owner locks.
package topk
