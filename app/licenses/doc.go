// Package licenses is the domain: a license for a customer's domain, the
// service that creates, lists, shows and revokes licenses, and the Vendor
// interface it needs from the upstream license vendor.
package licenses
