// Package ssrf keeps server-side requests to URLs that clients name (A2A
// push notification URLs) off the server's own networks: loopback, private
// (RFC 1918, the IPv6 ULA range, shared address space), link-local (cloud
// metadata at 169.254.169.254 included), unspecified and multicast
// addresses are refused, both when a URL is registered (its host resolved)
// and when a connection is dialled (a net.Dialer Control hook on the
// address actually dialled, so a name that resolves elsewhere later, DNS
// rebinding, is refused too).
package ssrf

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// MaxURLBytes bounds a URL's length.
const MaxURLBytes = 2048

// ErrRefused is the error of an address the rules refuse.
var ErrRefused = errors.New("address refused")

// sharedSpace is 100.64.0.0/10 (RFC 6598, carrier-grade NAT); thisNet is
// 0.0.0.0/8.
var (
	sharedSpace = netip.MustParsePrefix("100.64.0.0/10")
	thisNet     = netip.MustParsePrefix("0.0.0.0/8")
	broadcast   = netip.MustParseAddr("255.255.255.255")
)

// Allowed reports whether ip is a public unicast address a request may
// go to.
func Allowed(ip netip.Addr) bool {
	ip = ip.Unmap()
	switch {
	case !ip.IsValid(), ip.IsLoopback(), ip.IsPrivate(), ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(),
		ip.IsInterfaceLocalMulticast(), ip.IsMulticast(), ip.IsUnspecified(), ip == broadcast,
		sharedSpace.Contains(ip), thisNet.Contains(ip):
		return false
	}
	return true
}

// Resolver looks host names up (net.DefaultResolver).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckURL checks a URL a client registers: absolute http or https, a host,
// no user info (credentials go in the authentication), at most MaxURLBytes;
// unless allowPrivate, every address its host resolves to must be Allowed.
// The error says why, for the client.
func CheckURL(ctx context.Context, raw string, allowPrivate bool, r Resolver) error {
	if len(raw) > MaxURLBytes {
		return fmt.Errorf("the URL is longer than %d bytes", MaxURLBytes)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("the URL does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("the URL must be http or https")
	}
	if u.Host == "" || u.Hostname() == "" {
		return errors.New("the URL names no host")
	}
	if u.User != nil {
		return errors.New("the URL must not hold user info (send credentials in authentication)")
	}
	if allowPrivate {
		return nil
	}
	host := u.Hostname()
	if ip, err := netip.ParseAddr(host); err == nil {
		if !Allowed(ip) {
			return fmt.Errorf("the address %s is loopback, private, link-local, unspecified or multicast: %w", ip, ErrRefused)
		}
		return nil
	}
	if r == nil {
		r = net.DefaultResolver
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := r.LookupNetIP(lctx, "ip", strings.TrimSuffix(host, "."))
	if err != nil || len(ips) == 0 {
		return fmt.Errorf("the host %q does not resolve", host)
	}
	for _, ip := range ips {
		if !Allowed(ip) {
			return fmt.Errorf("the host %q resolves to %s, a loopback, private, link-local, unspecified or multicast address: %w", host, ip.Unmap(), ErrRefused)
		}
	}
	return nil
}

// Control is a net.Dialer Control hook refusing every address Allowed
// refuses.
func Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, ErrRefused)
	}
	if !Allowed(ap.Addr()) {
		return fmt.Errorf("dial %s: loopback, private, link-local, unspecified or multicast: %w", ap.Addr().Unmap(), ErrRefused)
	}
	return nil
}

// Client is an HTTP client for client-named URLs: attempts bounded by
// timeout, no proxy from the environment, no redirects followed, and,
// unless allowPrivate, every dial checked by Control.
func Client(timeout time.Duration, allowPrivate bool) *http.Client {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = Control
	}
	tr := &http.Transport{
		Proxy: nil, DialContext: d.DialContext, ForceAttemptHTTP2: true, MaxIdleConns: 32, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: timeout,
	}
	return &http.Client{Timeout: timeout, Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
