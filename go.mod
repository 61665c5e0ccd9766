module github.com/focus-go/focus-go

go 1.26.0

require (
	github.com/ardanlabs/jinja v1.8.0
	github.com/json-iterator/go v1.1.12
	github.com/stretchr/testify v1.12.1
	github.com/valyala/fasthttp v1.78.0
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/modern-go/concurrent v0.0.0-20180228061459-e0a39a4cb421 // indirect
	github.com/modern-go/reflect2 v1.0.2 // indirect
	github.com/molecule-man/go-brrr v1.3.1 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
