// Package codecheck holds the project-wide source checks of docs/architecture.md that
// no single package owns: logging goes through injected log/slog loggers,
// never the log package or fmt.Print* outside cmd/ (docs/architecture.md), and each
// package has exactly one package doc comment (docs/architecture.md). It has tests
// only.
package codecheck
