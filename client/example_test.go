package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/licensor-api/licensor/client"
)

func ExampleClient_CreateLicense() {
	c := client.New("http://127.0.0.1:8080", "<token from `licensor token issue`>")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	lic, err := c.CreateLicense(ctx, client.CreateLicenseInput{Name: "Acme", Domain: "acme.test"})
	var apiErr *client.APIError
	switch {
	case errors.As(err, &apiErr) && !apiErr.Retryable():
		fmt.Println("refused:", apiErr.Code, apiErr.Message, apiErr.Fields) // fix the request; a new intent
	case err != nil:
		fmt.Println("gave up:", err) // the retries are spent or the deadline passed
	default:
		fmt.Println(lic.ID, lic.LicenseKey, lic.Created)
	}
}
