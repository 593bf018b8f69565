package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ticksToMicros converts clock ticks (USER_HZ, 100 on Linux) to µs.
const ticksToMicros = 1e6 / 100

// cpuTicks is the process's user plus system time so far, in clock ticks,
// all of its threads included (/proc/<pid>/stat, fields 14 and 15).
func cpuTicks(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(s[end+1:]) // fields[0] is field 3 (state)
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	utime, err1 := strconv.ParseUint(fields[11], 10, 64)
	stime, err2 := strconv.ParseUint(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime", pid)
	}
	return utime + stime, nil
}

// memory is a process's resident set, in KiB.
type memory struct {
	RSS int // VmRSS: resident now
	HWM int // VmHWM: the peak resident set since the process started
}

// readMemory reads VmRSS and VmHWM from /proc/<pid>/status.
func readMemory(pid int) (memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	defer f.Close()
	var m memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
		if err != nil {
			return m, fmt.Errorf("/proc/%d/status %s: %w", pid, k, err)
		}
		if k == "VmRSS" {
			m.RSS = n
		} else {
			m.HWM = n
		}
	}
	return m, sc.Err()
}
