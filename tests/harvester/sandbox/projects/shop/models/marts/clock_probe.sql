-- what "today" is inside the build (the sandbox pins it)
select current_date as today, cast(now() as date) as now_date
