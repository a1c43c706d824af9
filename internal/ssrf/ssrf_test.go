package ssrf

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

func TestAllowed(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "127.9.9.9", "::1", "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1",
		"fc00::1", "fd12:3456::1", "169.254.169.254", "fe80::1", "0.0.0.0", "::", "224.0.0.1", "239.1.1.1", "ff02::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "100.64.0.1", "0.1.2.3", "255.255.255.255"} {
		if Allowed(netip.MustParseAddr(a)) {
			t.Errorf("%s is allowed", a)
		}
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "172.32.0.1", "2606:4700:4700::1111", "93.184.216.34"} {
		if !Allowed(netip.MustParseAddr(a)) {
			t.Errorf("%s is refused", a)
		}
	}
}

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ips, ok := f[host]; ok {
		return ips, nil
	}
	return nil, errors.New("no such host")
}

func TestCheckURL(t *testing.T) {
	r := fakeResolver{"public.example": {netip.MustParseAddr("93.184.216.34")},
		"rebind.example": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.0.0.5")},
		"meta.example":   {netip.MustParseAddr("169.254.169.254")}}
	ctx := context.Background()
	for raw, refused := range map[string]bool{
		"https://public.example/hook": false, "http://93.184.216.34:8080/x": false,
		"http://127.0.0.1:9/hook": true, "http://[::1]/": true, "http://rebind.example/": true, "http://meta.example/": true,
		"http://169.254.169.254/latest/meta-data": true, "http://[fd00::1]/": true, "http://0.0.0.0/": true,
	} {
		err := CheckURL(ctx, raw, false, r)
		if refused != errors.Is(err, ErrRefused) {
			t.Errorf("CheckURL(%s) = %v, refused %v", raw, err, refused)
		}
		if err := CheckURL(ctx, raw, true, r); err != nil {
			t.Errorf("CheckURL(%s) allowing private = %v", raw, err)
		}
	}
	for _, raw := range []string{"ftp://public.example/", "file:///etc/passwd", "https://", "https://u:p@public.example/", "http://nohost.example/",
		"https://public.example/" + string(make([]byte, MaxURLBytes))} {
		if err := CheckURL(ctx, raw, false, r); err == nil || errors.Is(err, ErrRefused) {
			t.Errorf("CheckURL(%.60s) = %v, want an invalid URL", raw, err)
		}
	}
	// localhost, through the system resolver.
	if err := CheckURL(ctx, "http://localhost:9/hook", false, nil); !errors.Is(err, ErrRefused) {
		t.Errorf("localhost: %v", err)
	}
}

// TestClientRefusesAtDial: the client's dialer refuses a loopback address
// whatever the URL said (DNS rebinding), and dials it when private
// addresses are allowed.
func TestClientRefusesAtDial(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }))
	defer srv.Close()
	_, err := Client(5*time.Second, false).Post(srv.URL, "application/json", nil)
	if !errors.Is(err, ErrRefused) || hits != 0 {
		t.Fatalf("a loopback dial: %v, %d requests", err, hits)
	}
	resp, err := Client(5*time.Second, true).Post(srv.URL, "application/json", nil)
	if err != nil || resp.StatusCode != 200 || hits != 1 {
		t.Fatalf("allowing private: %v %v %d", resp, err, hits)
	}
	resp.Body.Close()
}
