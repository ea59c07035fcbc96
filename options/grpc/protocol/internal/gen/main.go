// Command gen regenerates the Go code of the gRPC protocol (run it with
// "go generate" in options/grpc/protocol). It needs only the Go toolchain
// and the module proxy: buf compiles the .proto files, and protoc-gen-go and
// protoc-gen-go-grpc run as buf's local plugins, all through "go run" at the
// versions pinned below.
//
// service.proto imports the CloudEvents SDK's cloudevent.proto, which is
// not part of this repository: gen stages it, read from the SDK module this
// module requires, next to a copy of our .proto files in a temporary buf
// workspace, so that the import path matches the one the SDK's Go package
// registers ("cloudevent.proto").
package main

import (
	"bytes"
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
	protocGenGRPC  = "google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1"
	sdkModule      = "github.com/cloudevents/sdk-go/binding/format/protobuf/v2"
	sdkProto       = "pb/cloudevent.proto"
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
	// The SDK's CloudEvent, under deps/ at the path its Go package registers.
	sdkDir, err := goOutput(pkgDir, "list", "-m", "-f", "{{.Dir}}", sdkModule)
	if err != nil {
		return err
	}
	if sdkDir == "" { // not downloaded yet
		if _, err := goOutput(pkgDir, "mod", "download", sdkModule); err != nil {
			return err
		}
		if sdkDir, err = goOutput(pkgDir, "list", "-m", "-f", "{{.Dir}}", sdkModule); err != nil {
			return err
		}
	}
	if err := copyFile(filepath.Join(sdkDir, sdkProto), filepath.Join(tmp, "deps", "cloudevent.proto")); err != nil {
		return err
	}

	workspace := "version: v2\nmodules:\n  - path: api\n  - path: deps\n"
	template := fmt.Sprintf(`version: v2
plugins:
  - local: ["go", "run", %q]
    out: %q
    opt: ["module=%s"]
  - local: ["go", "run", %q]
    out: %q
    opt: ["module=%s", "require_unimplemented_servers=true"]
`, protocGenGo, pkgDir, goModule, protocGenGRPC, pkgDir, goModule)
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

func goOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(out.String()), nil
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
