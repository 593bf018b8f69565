package config

// ListenAddr is APP_ADDR as Load reads it (the environment, then .env, then
// the default), without the rest of Load: `licensor healthcheck` needs only
// the address, and must neither fail for want of APP_KEY nor make a key file.
// Other variables are not validated here; only a .env that cannot be read
// is an error.
func ListenAddr(getenv func(string) string) (string, error) {
	dotenv, err := readDotenv(".env")
	if err != nil {
		return "", err
	}
	v := &values{get: func(name string) string {
		if s := getenv(name); s != "" {
			return s
		}
		return dotenv[name]
	}}
	return v.load().Addr, nil
}
