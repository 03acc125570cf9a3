// Command ocitar packs one static binary into an OCI image archive that
// `ctr images import` accepts, without docker or a registry: a single-layer
// image whose entrypoint is that binary. scripts/kube-cluster.sh uses it for
// the pause image. The output is reproducible (fixed times and owners).
//
//	ocitar -name localhost/wsbroker/pause:1 -bin pause -path /pause -o pause.tar
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"time"
)

// blob is one content-addressed file of the layout.
type blob struct {
	mediaType string
	data      []byte
}

func (b blob) digest() string {
	sum := sha256.Sum256(b.data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func (b blob) descriptor() map[string]any {
	return map[string]any{"mediaType": b.mediaType, "digest": b.digest(), "size": len(b.data)}
}

func main() {
	name := flag.String("name", "", "image reference the import gives it")
	bin := flag.String("bin", "", "the binary to pack")
	path := flag.String("path", "/pause", "where the binary lives in the image (and its entrypoint)")
	out := flag.String("o", "", "output archive")
	flag.Parse()
	if *name == "" || *bin == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	exe, err := os.ReadFile(*bin)
	if err != nil {
		log.Fatal(err)
	}
	epoch := time.Unix(0, 0).UTC()

	// The layer: just the binary, owned by root, world-executable.
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	must(tw.WriteHeader(&tar.Header{Name: (*path)[1:], Mode: 0o755, Size: int64(len(exe)), ModTime: epoch, Typeflag: tar.TypeReg, Format: tar.FormatPAX}))
	_, err = tw.Write(exe)
	must(err)
	must(tw.Close())
	diffID := sha256.Sum256(raw.Bytes())
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	must(err)
	_, err = zw.Write(raw.Bytes())
	must(err)
	must(zw.Close())
	layer := blob{"application/vnd.oci.image.layer.v1.tar+gzip", gz.Bytes()}

	config := blob{"application/vnd.oci.image.config.v1+json", mustJSON(map[string]any{
		"created":      epoch.Format(time.RFC3339),
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": []string{*path}, "User": "65535:65535"},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
		"history":      []map[string]any{{"created": epoch.Format(time.RFC3339), "created_by": "scripts/kube/ocitar"}},
	})}
	manifest := blob{"application/vnd.oci.image.manifest.v1+json", mustJSON(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        config.descriptor(),
		"layers":        []any{layer.descriptor()},
	})}
	md := manifest.descriptor()
	md["annotations"] = map[string]string{
		// containerd names the imported image after this one.
		"io.containerd.image.name":          *name,
		"org.opencontainers.image.ref.name": *name,
	}
	md["platform"] = map[string]string{"architecture": "amd64", "os": "linux"}
	index := mustJSON(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []any{md}})

	f, err := os.Create(*out)
	must(err)
	aw := tar.NewWriter(f)
	add := func(name string, data []byte) {
		must(aw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg}))
		_, err := aw.Write(data)
		must(err)
	}
	add("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	add("index.json", index)
	for _, b := range []blob{layer, config, manifest} {
		add("blobs/sha256/"+b.digest()[len("sha256:"):], b.data)
	}
	must(aw.Close())
	must(f.Close())
	fmt.Println(*out)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	must(err)
	return b
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
