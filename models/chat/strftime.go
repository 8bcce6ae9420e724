package chat

import (
	"fmt"
	"strings"
	"time"
)

var (
	weekdayNames = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	monthNames   = []string{"January", "February", "March", "April", "May", "June", "July",
		"August", "September", "October", "November", "December"}
)

// strftime formats t as Python's datetime.strftime does in the C locale on
// glibc, for the naive local time transformers' strftime_now uses (so %z and
// %Z are empty). The glibc flags - (no padding), _ (space padding) and 0 are
// understood; an unknown directive is copied as is, as glibc does.
func strftime(format string, t time.Time) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 >= len(format) {
			b.WriteByte(c)
			continue
		}
		start := i
		i++
		pad := byte(0)
		if f := format[i]; (f == '-' || f == '_' || f == '0') && i+1 < len(format) {
			pad = f
			i++
		}
		num := func(v, width int, def byte) {
			p := def
			if pad != 0 {
				p = pad
			}
			s := fmt.Sprint(v)
			switch p {
			case '-':
			case '_':
				s = strings.Repeat(" ", max(0, width-len(s))) + s
			default:
				s = strings.Repeat("0", max(0, width-len(s))) + s
			}
			b.WriteString(s)
		}
		hour12 := t.Hour() % 12
		if hour12 == 0 {
			hour12 = 12
		}
		year, week := t.ISOWeek()
		switch format[i] {
		case 'a':
			b.WriteString(weekdayNames[t.Weekday()][:3])
		case 'A':
			b.WriteString(weekdayNames[t.Weekday()])
		case 'b', 'h':
			b.WriteString(monthNames[t.Month()-1][:3])
		case 'B':
			b.WriteString(monthNames[t.Month()-1])
		case 'c':
			b.WriteString(strftime("%a %b %e %H:%M:%S %Y", t))
		case 'C':
			num(t.Year()/100, 2, '0')
		case 'd':
			num(t.Day(), 2, '0')
		case 'D', 'x':
			b.WriteString(strftime("%m/%d/%y", t))
		case 'e':
			num(t.Day(), 2, '_')
		case 'f':
			num(t.Nanosecond()/1000, 6, '0')
		case 'F':
			b.WriteString(strftime("%Y-%m-%d", t))
		case 'G':
			num(year, 4, '0')
		case 'g':
			num(year%100, 2, '0')
		case 'H':
			num(t.Hour(), 2, '0')
		case 'I':
			num(hour12, 2, '0')
		case 'j':
			num(t.YearDay(), 3, '0')
		case 'k':
			num(t.Hour(), 2, '_')
		case 'l':
			num(hour12, 2, '_')
		case 'm':
			num(int(t.Month()), 2, '0')
		case 'M':
			num(t.Minute(), 2, '0')
		case 'n':
			b.WriteByte('\n')
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'P':
			if t.Hour() < 12 {
				b.WriteString("am")
			} else {
				b.WriteString("pm")
			}
		case 'r':
			b.WriteString(strftime("%I:%M:%S %p", t))
		case 'R':
			b.WriteString(strftime("%H:%M", t))
		case 's':
			fmt.Fprint(&b, t.Unix())
		case 'S':
			num(t.Second(), 2, '0')
		case 't':
			b.WriteByte('\t')
		case 'T', 'X':
			b.WriteString(strftime("%H:%M:%S", t))
		case 'u':
			wd := int(t.Weekday())
			if wd == 0 {
				wd = 7
			}
			num(wd, 1, '0')
		case 'U':
			num((t.YearDay()+6-int(t.Weekday()))/7, 2, '0')
		case 'V':
			num(week, 2, '0')
		case 'w':
			num(int(t.Weekday()), 1, '0')
		case 'W':
			num((t.YearDay()+6-(int(t.Weekday())+6)%7)/7, 2, '0')
		case 'y':
			num(t.Year()%100, 2, '0')
		case 'Y':
			num(t.Year(), 1, '0')
		case 'z', 'Z':
			// A naive datetime has no zone.
		case '%':
			b.WriteByte('%')
		default:
			b.WriteString(format[start : i+1])
		}
	}
	return b.String()
}
