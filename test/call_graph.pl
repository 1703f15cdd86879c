#!/usr/bin/perl
#
# The calls between pg_tenure's source files must run one way only: which
# file defines each function declared in a header of src/ (pg_tenure.h,
# and state_internal.h for the files of the state module), which other
# files call it, and no cycle among them.
#
# The edges among the state module's files (state.c, state_*.c) count for
# the cycle check like any other: state_internal.h lets state_wait.c and
# state_keeper.c call the core's helpers in state.c, and the core must not
# call back into them, so that the module is layered inside as the source
# tree is outside (the core calls only state_notify.c, which calls nothing
# of the module).  A cycle there would mean two files that can only be
# read together, which is what one file is for.
#
# And the state module alone touches the shared lease table: only the
# files that include state_internal.h take an LWLock or set up shared
# memory, and only the module's files (state.c, state_*.c) include it;
# but for epoch.c (the epoch clock) and promotion.c (what a promotion
# kept), which each set up a struct of their own under AddinShmemInitLock.
# And names say what is SQL-callable: pg_tenure_* for the C function of an
# SQL function, tenure_* for everything else.
# Prints the edges; exits 1 on a cycle, a lease-table access outside the
# module or a misnamed function.
#
#   perl test/call_graph.pl [SOURCE_TREE]

use strict;
use warnings;

my $src = shift // '.';
my $internal = 'state_internal.h';

sub slurp
{
	my ($path) = @_;
	open(my $fh, '<', $path) or die "call_graph: cannot read $path: $!\n";
	local $/;
	return <$fh>;
}

# functions declared in a header (static inline ones in a header are
# defined there, in no .c file, and make no edge)
my %declared;
for my $path (glob("$src/src/*.h"))
{
	my $header = slurp($path);
	$declared{$_} = 1
	  for ($header =~ /^extern\s[^;(]*?\b(tenure_\w+)\s*\(/mg);
}
die "call_graph: no declarations found under $src/src\n" unless %declared;

my (%text, %includes_internal);
for my $path (glob("$src/src/*.c"))
{
	(my $file = $path) =~ s{.*/}{};
	$text{$file} = slurp($path);
	$includes_internal{$file} = 1
	  if $text{$file} =~ /^#include\s+"\Q$internal\E"/m;
	# drop comments and string literals, which name functions too
	$text{$file} =~ s{/\*.*?\*/}{}gs;
	$text{$file} =~ s{"(?:\\.|[^"\\])*"}{""}g;
}

my %defined_in;
for my $file (keys %text)
{
	$defined_in{$1} = $file
	  while $text{$file} =~ /^(tenure_\w+)\(/mg;
}

my %edges;
for my $file (sort keys %text)
{
	for my $fn (sort keys %declared)
	{
		my $home = $defined_in{$fn} or next;
		next if $home eq $file;
		$edges{$file}{$home} = 1 if $text{$file} =~ /\b\Q$fn\E\s*\(/;
	}
}

for my $file (sort keys %edges)
{
	print "call_graph: $file -> ", join(', ', sort keys %{ $edges{$file} }), "\n";
}

# depth-first search for a back edge
my (%state, @stack, $cycle);
sub visit
{
	my ($node) = @_;
	$state{$node} = 1;
	push @stack, $node;
	for my $next (sort keys %{ $edges{$node} // {} })
	{
		if (($state{$next} // 0) == 1)
		{
			my @from = @stack;
			shift @from while $from[0] ne $next;
			$cycle //= join(' -> ', @from, $next);
		}
		visit($next) unless $state{$next};
	}
	pop @stack;
	$state{$node} = 2;
}
visit($_) for grep { !$state{$_} } sort keys %text;

my @module = sort grep { $includes_internal{$_} } keys %text;
my %own_struct = ('epoch.c' => 1, 'promotion.c' => 1);
my @outside;
for my $file (sort keys %text)
{
	if ($includes_internal{$file})
	{
		push @outside, "$file includes $internal"
		  unless $file =~ /^state(?:_\w+)?\.c$/;
		next;
	}
	my $t = $text{$file};
	if ($own_struct{$file})
	{
		$t =~ s/\bLWLock(?:Acquire|Release)\(AddinShmemInitLock\b//g;
		$t =~ s/\bShmemInitStruct\b//g;
	}
	push @outside, "$file: $1"
	  while $t =~ /\b(LWLockAcquire|LWLockConditionalAcquire|ShmemInitHash|ShmemInitStruct)\b/g;
}

# Names say what is SQL-callable: the C function behind every SQL function
# (PG_FUNCTION_INFO_V1) is named pg_tenure_<its SQL name>, and nothing else
# is; internal functions are tenure_*.
my @names;
for my $file (sort keys %text)
{
	my %entry = map { $_ => 1 } ($text{$file} =~ /^PG_FUNCTION_INFO_V1\((\w+)\);/mg);
	push @names, "$file: SQL entry point $_ is not named pg_tenure_*"
	  for grep { !/^pg_tenure_/ } sort keys %entry;
	push @names, "$file: $_ is named like an SQL entry point but is not one"
	  for grep { !$entry{$_} } ($text{$file} =~ /^(pg_tenure_\w+)\(/mg);
}

if ($cycle)
{
	print STDERR "call_graph: cycle: $cycle\n";
	exit 1;
}
print "call_graph: no cycle\n";
if (@outside)
{
	print STDERR "call_graph: lease table touched outside the state module: $_\n" for @outside;
	exit 1;
}
if (@names)
{
	print STDERR "call_graph: $_\n" for @names;
	exit 1;
}
print "call_graph: SQL entry points are pg_tenure_*, internals tenure_*\n";
print "call_graph: only the state module (", join(', ', @module),
  ") touches the lease table\n";
