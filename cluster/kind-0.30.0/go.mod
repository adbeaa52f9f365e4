// kind v0.30.0, alone in its module (the lab's old cluster's release; issue 25).
// Upstream's go.mod says go 1.17, so its binaries get go1.20's GODEBUG defaults
// (the oldest the toolchain keeps); the godebug line below keeps them. See ../README.md.
module throttlelab/cluster/kind-0.30.0

go 1.24.0

godebug default=go1.20

tool sigs.k8s.io/kind

require (
	al.essio.dev/pkg/shellescape v1.5.1 // indirect
	github.com/BurntSushi/toml v1.4.0 // indirect
	github.com/evanphx/json-patch/v5 v5.6.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/pelletier/go-toml v1.9.5 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/spf13/cobra v1.8.0 // indirect
	github.com/spf13/pflag v1.0.5 // indirect
	go.yaml.in/yaml/v3 v3.0.4 // indirect
	golang.org/x/sys v0.6.0 // indirect
	sigs.k8s.io/kind v0.30.0 // indirect
	sigs.k8s.io/yaml v1.4.0 // indirect
)
