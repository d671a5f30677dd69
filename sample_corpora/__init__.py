"""The bundled sample corpora (README.md here) as package data: this folder installs as the
package `workbench.sample_corpora` (pyproject.toml maps it), which `sag2wb demo` reads with
`importlib.resources.files("workbench.sample_corpora")`. Nothing here is code."""
