package work_test

import (
	"bytes"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// The README's complete program is Example_program's file with main in
// place of the Example: a reader who pastes it runs what go test runs.
func TestREADMEProgramIsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(package main\n.*?)```").FindAllSubmatch(readme, -1)
	if len(blocks) != 1 {
		t.Fatalf("README has %d Go blocks that are a whole program, want 1", len(blocks))
	}
	program := blocks[0][1]
	if formatted, err := format.Source(program); err != nil {
		t.Fatalf("README's program does not parse: %v", err)
	} else if !bytes.Equal(formatted, program) {
		t.Error("README's program is not gofmt-ed")
	}
	example, err := os.ReadFile("example_program_test.go")
	if err != nil {
		t.Fatal(err)
	}

	readmeImports, readmeDecls := declarations(t, program, "main")
	exampleImports, exampleDecls := declarations(t, example, "Example_program")
	if want := append(exampleImports, strconv.Quote("os")); !sameSet(readmeImports, want) {
		t.Errorf("README's program imports %v, want the example's and os: %v", readmeImports, want)
	}
	if !slices.Equal(readmeDecls, exampleDecls) {
		for i := range max(len(readmeDecls), len(exampleDecls)) {
			var r, e string
			if i < len(readmeDecls) {
				r = readmeDecls[i]
			}
			if i < len(exampleDecls) {
				e = exampleDecls[i]
			}
			if r != e {
				t.Errorf("declaration %d differs\nREADME:\n%s\nexample_program_test.go:\n%s", i, r, e)
			}
		}
	}
}

// declarations returns the import paths of a Go file and the source of each
// of its other declarations (with their doc comments), leaving out the
// function named skip.
func declarations(t *testing.T, src []byte, skip string) (imports, decls []string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		imports = append(imports, imp.Path.Value)
	}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.IMPORT {
			continue
		}
		start := d.Pos()
		if fn, ok := d.(*ast.FuncDecl); ok {
			if fn.Name.Name == skip {
				continue
			}
			if fn.Doc != nil {
				start = fn.Doc.Pos()
			}
		}
		decls = append(decls, string(src[fset.Position(start).Offset:fset.Position(d.End()).Offset]))
	}
	return imports, decls
}

func sameSet(a, b []string) bool {
	a, b = slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b))
	return slices.Equal(a, b)
}
