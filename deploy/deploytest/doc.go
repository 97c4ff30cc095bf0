// Package deploytest checks what deploy/ ships against a running Weir
// cluster, with the real tools an operator would use: Debian's Prometheus
// (promtool, and a live scrape answering every dashboard and alert query)
// and a headless Chromium driving the status page at /ui.
//
// The package has no code of its own; its tests start a three-node
// cluster in-process on loopback. A test whose tool is missing skips,
// except under CI=true, where it fails (.ci/run installs the tools).
package deploytest
