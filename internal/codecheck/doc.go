// Package codecheck holds the project-wide source checks of STYLE.md that
// no single package owns: logging goes through injected log/slog loggers,
// never the log package or fmt.Print* outside cmd/ (STYLE.md §6), and each
// package has exactly one package doc comment (STYLE.md §7). It has tests
// only.
package codecheck
