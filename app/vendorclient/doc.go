// Package vendorclient holds the drivers that satisfy licenses.Vendor: the
// http driver that speaks the vendor protocol, and an in-memory fake.
package vendorclient
