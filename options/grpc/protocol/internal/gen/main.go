// Command gen regenerates the Go messages of the gRPC protocol (run it with
// "go generate" in options/grpc/protocol). It needs only the Go toolchain
// and the module proxy: buf compiles the .proto files, and protoc-gen-go
// runs as buf's local plugin, both through "go run" at the versions pinned
// below. The service glue (service.go) is written by hand: it serves OCM's
// service name, which the messages' package is not.
package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Pinned tool versions. protoc-gen-go matches the google.golang.org/protobuf
// version in go.mod, so the generated code and the runtime agree.
const (
	buf            = "github.com/bufbuild/buf/cmd/buf@v1.75.0"
	protocGenGo    = "google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12"
	goModule       = "github.com/workwire/sdk-go/options/grpc/protocol"
	protoRootInPkg = "workwire" // our .proto files live under ./workwire
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	pkgDir, err := os.Getwd()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "workwire-protogen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	// Our protos, under api/ with their paths unchanged.
	if err := copyTree(filepath.Join(pkgDir, protoRootInPkg), filepath.Join(tmp, "api", protoRootInPkg)); err != nil {
		return err
	}
	workspace := "version: v2\nmodules:\n  - path: api\n"
	template := fmt.Sprintf(`version: v2
plugins:
  - local: ["go", "run", %q]
    out: %q
    opt: ["module=%s"]
`, protocGenGo, pkgDir, goModule)
	if err := os.WriteFile(filepath.Join(tmp, "buf.yaml"), []byte(workspace), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "buf.gen.yaml"), []byte(template), 0o644); err != nil {
		return err
	}
	cmd := exec.Command("go", "run", buf, "generate", "api", "--template", "buf.gen.yaml")
	cmd.Dir = tmp
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// The plugins run outside any module; GOFLAGS such as -mod=vendor
	// would break "go run pkg@version".
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("buf generate: %w", err)
	}
	return nil
}

func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".proto") {
			return nil
		}
		return copyFile(path, filepath.Join(to, rel))
	})
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}
