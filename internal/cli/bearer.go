package cli

import "net/http"

// bearerClient returns an HTTP client that sends the token in file as a
// bearer token with every request, or nil (the default client) when file
// is "".
func bearerClient(file string) (*http.Client, error) {
	if file == "" {
		return nil, nil
	}
	tok, err := readToken("", file)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: bearerTransport{tok}}, nil
}

type bearerTransport struct{ token string }

func (t bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return http.DefaultTransport.RoundTrip(r)
}
