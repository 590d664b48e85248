package redistest

import (
	"reflect"
	"testing"
)

func TestBinaries(t *testing.T) {
	tests := []struct {
		name                string
		server, cli         string // the environment; "" is unset
		wantServer, wantCLI string
	}{
		{name: "defaults", wantServer: "redis-server", wantCLI: "redis-cli"},
		{name: "valkey by name", server: "valkey-server", wantServer: "valkey-server", wantCLI: "valkey-cli"},
		{name: "valkey by path", server: "/opt/valkey/bin/valkey-server",
			wantServer: "/opt/valkey/bin/valkey-server", wantCLI: "/opt/valkey/bin/valkey-cli"},
		{name: "cli named", server: "/opt/x/redis-server", cli: "/usr/bin/redis-cli",
			wantServer: "/opt/x/redis-server", wantCLI: "/usr/bin/redis-cli"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(ServerEnv, tt.server)
			t.Setenv(CLIEnv, tt.cli)
			server, cli := Binaries()
			if server != tt.wantServer || cli != tt.wantCLI {
				t.Errorf("Binaries() = %q, %q; want %q, %q", server, cli, tt.wantServer, tt.wantCLI)
			}
		})
	}
}

func TestParseVersionLine(t *testing.T) {
	tests := []struct {
		line    string
		want    Engine
		wantErr bool
	}{
		{line: "Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=ae4d7c971a948f0\n",
			want: Engine{Name: "redis", Version: "7.0.15"}},
		{line: "Valkey server v=8.0.1 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64 build=39f7c371e0a96e3d\n",
			want: Engine{Name: "valkey", Version: "8.0.1"}},
		{line: "", wantErr: true},
		{line: "redis-cli 7.0.15\n", wantErr: true},
		{line: "Redis server sha=00000000:0\n", wantErr: true},
		{line: "Redis server v= sha=0\n", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseVersionLine(tt.line)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseVersionLine(%q) = %+v, %v; want %+v, error %v", tt.line, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestEngineFromInfo(t *testing.T) {
	tests := []struct {
		name    string
		info    string
		want    Engine
		wantErr bool
	}{
		{name: "redis 7", info: "# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n",
			want: Engine{Name: "redis", Version: "7.0.15"}},
		{name: "valkey 8 keeps a redis_version for old clients",
			info: "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n",
			want: Engine{Name: "valkey", Version: "8.0.1"}},
		{name: "no version", info: "# Server\r\nserver_name:valkey\r\nredis_version:7.2.4\r\n", wantErr: true},
		{name: "empty", info: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := engineFromInfo(tt.info)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("engineFromInfo = %+v, %v; want %+v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestStartedServerIsTheNamedEngine checks that the server the harness starts
// is the engine its binary claims to be (so a Valkey run really tests
// Valkey), and logs which one it is.
func TestStartedServerIsTheNamedEngine(t *testing.T) {
	want, err := FindEngine(t.Context())
	if err != nil {
		t.Fatalf("FindEngine: %v", err)
	}
	t.Logf("engine: %v", want)
	s := StartServer(t)
	info, err := s.Client(t).Info(t.Context(), "server").Result()
	if err != nil {
		t.Fatalf("INFO server: %v", err)
	}
	got, err := engineFromInfo(info)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Engine{Name: want.Name, Version: want.Version}); !reflect.DeepEqual(got, want) {
		t.Errorf("started server reports %+v, its binary %+v", got, want)
	}
}
