"""The spec as data: its records and constants (`model`), the `install` key (`install_items`), and text ->
`Spec` with every error and its hint (`parse`, over the typed readers of
`reader`); the built-in `default_matrix.toml`. Pure; may import
`vocab` and `judge`. Finding and reading the file is `world.specfile`.
"""
