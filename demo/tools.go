package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
	_ "time/tzdata" // get_time must know every zone on a machine without zoneinfo

	"github.com/planround/planround/agent"
	"github.com/planround/planround/interact"
)

// Tools returns the demo tools: get_weather, get_time, run_command (with
// [DefaultCommandTimeout]) and show_card.
func Tools() []agent.Tool {
	return []agent.Tool{GetWeather(), GetTime(), RunCommand(0), ShowCard()}
}

// objectSchema returns a JSON schema for an object with string properties
// (name, description pairs), all of them required.
func objectSchema(props ...string) map[string]any {
	properties := map[string]any{}
	var required []string
	for i := 0; i+1 < len(props); i += 2 {
		properties[props[i]] = map[string]any{"type": "string", "description": props[i+1]}
		required = append(required, props[i])
	}
	return map[string]any{
		"type":                 "object",
		"properties":           properties,
		"required":             required,
		"additionalProperties": false,
	}
}

// decodeArgs decodes a call's arguments; empty arguments are an empty
// object.
func decodeArgs(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("invalid arguments: %w", err)
	}
	return nil
}

// GetWeather returns the get_weather tool: made-up but deterministic
// weather for a city, derived from a hash of its name. It needs approval
// like any tool that does not opt out.
func GetWeather() agent.Tool {
	return agent.FuncTool{
		Def: agent.ToolDefinition{
			Name:        "get_weather",
			Description: "Get the current weather for a city (demo data: made up, but always the same for a city).",
			Parameters:  objectSchema("city", "City name, for example Paris."),
		},
		Fn: func(_ context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
			var a struct {
				City string `json:"city"`
			}
			if err := decodeArgs(args, &a); err != nil {
				return "", err
			}
			city := strings.TrimSpace(a.City)
			if city == "" {
				return "", errors.New("city is required")
			}
			return weather(city), nil
		},
	}
}

var conditions = []string{"sunny", "partly cloudy", "cloudy", "light rain", "showers", "thunderstorms", "foggy", "windy", "snow"}

// weather derives a report from the city's name.
func weather(city string) string {
	h := fnv.New32a()
	h.Write([]byte(strings.ToLower(city)))
	n := h.Sum32()
	temp := int(n%40) - 5
	cond := conditions[(n>>8)%uint32(len(conditions))]
	if cond == "snow" && temp > 2 {
		cond = "light rain"
	}
	humidity := 30 + (n>>16)%60
	wind := (n >> 24) % 40
	return fmt.Sprintf("%s: %s, %d °C, humidity %d%%, wind %d km/h (demo data)", city, cond, temp, humidity, wind)
}

// GetTime returns the get_time tool: the current time in an IANA time
// zone such as Europe/Paris; an unknown zone is an error for the model.
func GetTime() agent.Tool { return getTime(time.Now) }

func getTime(now func() time.Time) agent.Tool {
	return agent.FuncTool{
		Def: agent.ToolDefinition{
			Name:        "get_time",
			Description: "Get the current date and time in an IANA time zone.",
			Parameters:  objectSchema("timezone", "IANA time zone name, for example Europe/Paris or UTC."),
		},
		Fn: func(_ context.Context, args json.RawMessage, _ agent.Progress) (string, error) {
			var a struct {
				Timezone string `json:"timezone"`
			}
			if err := decodeArgs(args, &a); err != nil {
				return "", err
			}
			tz := strings.TrimSpace(a.Timezone)
			if tz == "" {
				tz = "UTC"
			}
			loc, err := time.LoadLocation(tz)
			if err != nil {
				return "", fmt.Errorf("unknown time zone %q: give an IANA name such as Europe/Paris", tz)
			}
			t := now().In(loc)
			return fmt.Sprintf("%s in %s (%s, UTC%s)", t.Format("15:04 on Monday, 2 January 2006"), tz, t.Format("MST"), t.Format("-07:00")), nil
		},
	}
}

// ShowCard returns the show_card tool: a silent display of a card with a
// title, a body, and optionally an image and name and value fields. It is
// [interact.ShowCard]: its side message, yielded right after the call's
// executing chunk, is the [interact.Card] to show; the tool only confirms.
// It skips approval: it changes nothing.
func ShowCard() agent.Tool { return interact.ShowCard() }
