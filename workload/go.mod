module cpulab

go 1.24
