// Package zlib knows the copies of zlib a target may hold: which release
// one is (from the copyright string zlib embeds), the sizes of its
// internal state structs that computing a stream's bytes from its init
// arguments needs, whether an object is a zlib library of its own or
// java.util.zip's, and the probes of its stream lifecycles (Family, on
// Linux).
package zlib
