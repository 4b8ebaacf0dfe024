package relockotel_test

import (
	"log"

	"github.com/redis/rueidis"
	"github.com/relock-go/relock"
	relockotel "github.com/relock-go/relock/otel"
)

// An observer on the global MeterProvider and TracerProvider, which the program sets up
// (with its exporters) before it makes the observer.
func Example() {
	obs, err := relockotel.New()
	if err != nil {
		log.Fatal(err)
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	client, err := relock.New(rc, relock.WithObserver(obs))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	_ = client.Lock("orders:42") // its waits, holds and lost leases are now recorded
}
